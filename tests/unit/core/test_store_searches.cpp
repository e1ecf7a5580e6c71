// Tests for src/store/searches.cpp: the trial cache, search states and findings survive
// reopening, replace what they should and nothing else.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "store/store.hpp"
#include "test_support.hpp"

namespace faultline::store {
namespace {
using faultline::testing::ScratchDir;

TEST(StoreSearches, TrialCacheFindsWhatWasPutAndNothingElse) {
  ScratchDir dir;
  const std::string path = dir.file("t.db");
  {
    Store store = Store::open(path);
    EXPECT_FALSE(store.find_trial("abc").has_value());
    store.put_trial("abc", R"({"ranks":1})", std::nullopt, std::nullopt);
  }
  Store store = Store::open(path);
  auto started = store.find_trial("abc");
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->spec_json, R"({"ranks":1})");
  EXPECT_FALSE(started->outcome_json.has_value());
  EXPECT_FALSE(started->run_id.has_value());

  const int64_t run_id = store.create_run(RunInfo{});
  store.put_trial("abc", R"({"ranks":1})", std::string(R"({"verdict":"fail"})"), run_id);
  auto finished = store.find_trial("abc");
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->id, started->id);
  EXPECT_EQ(finished->outcome_json.value_or(""), R"({"verdict":"fail"})");
  EXPECT_EQ(finished->run_id, run_id);
  EXPECT_FALSE(store.find_trial("abd").has_value());
}

TEST(StoreSearches, SearchStateIsRewrittenAndListedNewestFirst) {
  ScratchDir dir;
  Store store = Store::open(dir.file("s.db"));
  const int64_t first = store.create_search("isolate", R"({"phase":"reproduce"})");
  const int64_t second = store.create_search("bisect-steps", "{}");
  store.update_search(first, R"({"phase":"steps"})", SearchStatus::Done);

  auto search = store.get_search(first);
  ASSERT_TRUE(search.has_value());
  EXPECT_EQ(search->kind, "isolate");
  EXPECT_EQ(search->state_json, R"({"phase":"steps"})");
  EXPECT_EQ(search->status, SearchStatus::Done);
  EXPECT_FALSE(search->created_at.empty());
  EXPECT_GE(search->updated_at, search->created_at);

  auto listed = store.list_searches();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, second);
  EXPECT_EQ(listed[0].status, SearchStatus::Running);
  EXPECT_FALSE(store.get_search(99).has_value());
  EXPECT_THROW(store.update_search(99, "{}", SearchStatus::Failed), std::runtime_error);
}

TEST(StoreSearches, FindingsKeepTheirFieldsAndSearch) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  int64_t search_id = 0, with_search = 0, without = 0;
  {
    Store store = Store::open(path);
    search_id = store.create_search("isolate", "{}");
    with_search =
        store.add_finding({0, "nonfinite", R"({"step":30})", R"({"ranks":1})", search_id, ""});
    without = store.add_finding({0, "hang", "", "", std::nullopt, ""});
  }
  Store store = Store::open(path);
  auto finding = store.get_finding(with_search);
  ASSERT_TRUE(finding.has_value());
  EXPECT_EQ(finding->kind, "nonfinite");
  EXPECT_EQ(finding->fields_json, R"({"step":30})");
  EXPECT_EQ(finding->repro_json, R"({"ranks":1})");
  EXPECT_EQ(finding->search_id, search_id);
  auto bare = store.get_finding(without);
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->fields_json, "{}");
  EXPECT_FALSE(bare->search_id.has_value());
  auto listed = store.list_findings();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, without);
}

TEST(StoreSearches, SearchStatusNamesRoundTrip) {
  for (SearchStatus status : {SearchStatus::Running, SearchStatus::Done, SearchStatus::Failed})
    EXPECT_EQ(search_status_from_string(to_string(status)), status);
  EXPECT_THROW(search_status_from_string("paused"), std::invalid_argument);
}

}  // namespace
}  // namespace faultline::store
