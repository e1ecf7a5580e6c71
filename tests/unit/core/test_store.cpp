// Tests for src/store (schema.cpp, store.cpp, runs.cpp): opening and migrating, refusing files
// that are not ours or too new, run rows, transactions, interrupted runs, lock timeouts.
#include "store/store.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "store_downgrade.hpp"
#include "test_support.hpp"

namespace faultline::store {
namespace {
using faultline::testing::downgrade_store;
using faultline::testing::ScratchDir;
using faultline::testing::user_error;
using faultline::testing::write_file;

RunInfo sample_run() {
  RunInfo run;
  run.config_path = "recipes/tiny.toml";
  run.config = "[model]\nlayers = 2\n";
  run.config_hash = "0123456789abcdef";
  run.ranks = 4;
  run.steps = 100;
  run.data_fraction = 0.25;
  run.argv_json = R"(["faultline-train","--config","tiny.toml"])";
  run.launcher = "slurm";
  run.started_at = "2024-05-01T12:00:00.000Z";
  run.parent = "smoke:3";
  run.owner_pid = 4242;
  run.owner_host = "node7";
  return run;
}

TEST(Store, CreatesANewFileAtTheCurrentVersion) {
  ScratchDir dir;
  Store store = Store::open(dir.file("new.db"));
  EXPECT_EQ(store.schema_version(), kSchemaVersion);
  EXPECT_EQ(store.path(), dir.file("new.db"));
  EXPECT_TRUE(store.list_runs().empty());
}

TEST(Store, MigratesAnEmptyFile) {
  ScratchDir dir;
  write_file(dir.file("empty.db"), "");
  EXPECT_EQ(Store::open(dir.file("empty.db")).schema_version(), kSchemaVersion);
}

TEST(Store, ReopeningIsIdempotentAndKeepsEverything) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  int64_t id = Store::open(path).create_run(sample_run());
  for (int i = 0; i < 3; ++i) {
    Store store = Store::open(path);
    EXPECT_EQ(store.schema_version(), kSchemaVersion);
    ASSERT_EQ(store.list_runs().size(), 1u);
    EXPECT_EQ(store.get_run(id)->config_hash, "0123456789abcdef");
  }
}

TEST(Store, CreateFinishGetRoundTrip) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t id = store.create_run(sample_run());
  RunInfo running = *store.get_run(id);
  EXPECT_EQ(running.id, id);
  EXPECT_EQ(running.config_path, "recipes/tiny.toml");
  EXPECT_EQ(running.config, "[model]\nlayers = 2\n");
  EXPECT_EQ(running.ranks, 4);
  EXPECT_EQ(running.steps, 100);
  EXPECT_DOUBLE_EQ(running.data_fraction, 0.25);
  EXPECT_EQ(running.argv_json, R"(["faultline-train","--config","tiny.toml"])");
  EXPECT_EQ(running.launcher, "slurm");
  EXPECT_EQ(running.started_at, "2024-05-01T12:00:00.000Z");
  EXPECT_EQ(running.ended_at, "");
  EXPECT_EQ(running.status, RunStatus::Running);
  EXPECT_FALSE(running.exit_code.has_value());
  EXPECT_FALSE(running.signal.has_value());
  EXPECT_EQ(running.verdict, "");
  EXPECT_EQ(running.parent, "smoke:3");
  EXPECT_EQ(running.owner_pid, 4242);
  EXPECT_EQ(running.owner_host, "node7");

  RunInfo result;
  result.exit_code = 139;
  result.signal = "SIGSEGV";
  result.verdict = "fail";
  result.failures = {{"crash", -1, 2, "rank 2 died of SIGSEGV"}, {"nonfinite", 17, 0, "loss"}};
  store.finish_run(id, result);
  RunInfo done = *store.get_run(id);
  EXPECT_EQ(done.status, RunStatus::Finished);  // Running in the result means Finished
  EXPECT_EQ(done.exit_code, 139);
  EXPECT_EQ(done.signal, "SIGSEGV");
  EXPECT_EQ(done.verdict, "fail");
  EXPECT_FALSE(done.ended_at.empty());
  ASSERT_EQ(done.failures.size(), 2u);
  EXPECT_EQ(done.failures[0].kind, "crash");
  EXPECT_EQ(done.failures[0].step, -1);
  EXPECT_EQ(done.failures[0].rank, 2);
  EXPECT_EQ(done.failures[1].kind, "nonfinite");
  EXPECT_EQ(done.failures[1].step, 17);
  EXPECT_EQ(done.failures[1].detail, "loss");
  EXPECT_EQ(done.config, running.config);  // finishing leaves the request alone

  result.failures = {{"hang", 5, 1, ""}};  // a second finish replaces the failures
  store.finish_run(id, result);
  ASSERT_EQ(store.get_run(id)->failures.size(), 1u);
  EXPECT_EQ(store.get_run(id)->failures[0].kind, "hang");
}

TEST(Store, DefaultsAreFilledIn) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  RunInfo run = *store.get_run(store.create_run(RunInfo{}));
  EXPECT_EQ(run.argv_json, "[]");
  EXPECT_EQ(run.started_at.size(), 24u);  // 2024-05-01T12:34:56.789Z
  EXPECT_EQ(run.started_at.back(), 'Z');
  EXPECT_FALSE(store.get_run(run.id + 1).has_value());
}

TEST(Store, ListRunsNewestFirstWithLimit) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  for (int i = 0; i < 5; ++i) {
    RunInfo run = sample_run();
    run.parent = "p" + std::to_string(i);
    store.create_run(run);
  }
  auto runs = store.list_runs(3);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].parent, "p4");
  EXPECT_EQ(runs[2].parent, "p2");
  EXPECT_GT(runs[0].id, runs[1].id);
  EXPECT_EQ(store.list_runs().size(), 5u);
}

TEST(Store, ARunsArgvAndLengthAreSetOnceKnown) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t id = store.create_run(sample_run());
  store.set_run_argv(id, R"(["faultline-train","--out","runs/run-1"])");
  store.set_run_steps(id, 250);
  const auto run = store.get_run(id);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->argv_json, R"(["faultline-train","--out","runs/run-1"])");
  EXPECT_EQ(run->steps, 250);
  EXPECT_EQ(run->config_hash, "0123456789abcdef");  // the rest as created
  EXPECT_THROW(store.set_run_steps(id + 1, 1), std::runtime_error);
}

TEST(Store, EventsOfSomeNamesOnlyInInsertionOrder) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  const int64_t id = store.create_run(sample_run());
  std::vector<EventRecord> events;
  for (const char* name : {"start", "collective", "checkpoint", "collective", "resume", "end"}) {
    EventRecord event;
    event.name = name;
    event.json = std::string(R"({"name":")") + name + "\"}";
    events.push_back(event);
  }
  store.add_events(id, events);
  std::vector<std::string> names;
  for (const auto& event : store.events(id, {"resume", "checkpoint"})) names.push_back(event.name);
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoint", "resume"}));
  EXPECT_EQ(store.events(id, {"start"}).at(0).json, R"({"name":"start"})");
  EXPECT_TRUE(store.events(id, {"batch"}).empty());
  EXPECT_TRUE(store.events(id, {}).empty());
  EXPECT_EQ(store.events(id).size(), 6u);
}

TEST(Store, FinishingAnUnknownRunIsABug) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  EXPECT_THROW(store.finish_run(99, RunInfo{}), std::runtime_error);
}

TEST(Store, RefusesANewerSchemaNamingPathAndVersions) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  Store::open(path).create_run(sample_run());
  const std::string newer = std::to_string(kSchemaVersion + 1);
  Store::raw_exec_for_tests(path, "PRAGMA user_version = " + newer);
  ErrorItem error = user_error([&] { Store::open(path); });
  EXPECT_EQ(error.where, path);
  EXPECT_NE(error.what.find("version " + newer), std::string::npos) << error.what;
  EXPECT_NE(error.what.find(std::to_string(kSchemaVersion)), std::string::npos) << error.what;
  Store::raw_exec_for_tests(path, "PRAGMA user_version = " + std::to_string(kSchemaVersion));
  EXPECT_EQ(Store::open(path).list_runs().size(), 1u);  // refusing changed nothing
}

TEST(Store, AVersion1FileIsMigratedAndKeepsItsFingerprints) {
  ScratchDir dir;
  const std::string path = dir.file("v1.db");
  const int64_t id = Store::open(path).create_run(sample_run());
  Store::open(path).add_fingerprints(id, {{0, 0.5, 3, "grads", "00ff", 2.5, {1.0, -0.25}}});
  downgrade_store(path, 1);  // no norm, no sketch, no run_malformed
  Store store = Store::open(path);
  EXPECT_EQ(store.schema_version(), kSchemaVersion);
  auto old = store.fingerprints(id);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].hash, "00ff");
  EXPECT_FALSE(old[0].norm.has_value());
  EXPECT_TRUE(old[0].sketch.empty());
  const double nan = std::nan("");
  store.add_fingerprints(id, {{1, 0.75, 4, "params", "0a0b", 3.0, {0.1, -1e-300, nan}}});
  auto fresh = store.fingerprints(id).at(1);
  EXPECT_EQ(fresh.norm, 3.0);
  ASSERT_EQ(fresh.sketch.size(), 3u);
  EXPECT_EQ(fresh.sketch[0], 0.1);
  EXPECT_EQ(fresh.sketch[1], -1e-300);
  EXPECT_TRUE(std::isnan(fresh.sketch[2]));
}

TEST(Store, AVersion4FilesFailuresAreMigratedWithoutAShownByStep) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  int64_t id = 0;
  {
    Store store = Store::open(path);
    id = store.create_run(sample_run());
    RunInfo result;
    result.failures = {{"grad_explode", 40, 0, "grad_norm above 1000", 42}};
    store.finish_run(id, result);
    EXPECT_EQ(store.get_run(id)->failures.at(0).shown_by, 42);
  }
  downgrade_store(path, 4);
  Store store = Store::open(path);
  EXPECT_EQ(store.schema_version(), kSchemaVersion);
  const auto failure = store.get_run(id)->failures.at(0);
  EXPECT_EQ(failure.kind, "grad_explode");
  EXPECT_EQ(failure.step, 40);
  EXPECT_EQ(failure.shown_by, -1);  // not known then: the step itself
}

TEST(Store, AVersion5FilesStepsAreMigratedAsNotSkippedWithoutAScale) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  int64_t id = 0;
  {
    Store store = Store::open(path);
    id = store.create_run(sample_run());
    StepRecord step;
    step.step = 3;
    step.loss = 2.5;
    store.add_steps(id, {step});
  }
  downgrade_store(path, 5);
  Store store = Store::open(path);
  EXPECT_EQ(store.schema_version(), kSchemaVersion);
  const auto steps = store.steps(id);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].loss, 2.5);
  EXPECT_FALSE(steps[0].skipped);
  EXPECT_FALSE(steps[0].loss_scale.has_value());
}

// The --set launcher.* keys a run was placed with come back with it (a replay is placed so).
TEST(Store, ARunKeepsTheLauncherKeysItWasPlacedWith) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  RunInfo placed = sample_run();
  placed.launcher = "slurm";
  placed.launcher_sets_json = R"(["launcher.nodes=2","launcher.exclude=n1"])";
  const int64_t id = store.create_run(placed);
  EXPECT_EQ(store.get_run(id)->launcher_sets_json, placed.launcher_sets_json);
  EXPECT_EQ(store.get_run(store.create_run(sample_run()))->launcher_sets_json, "[]");
}

TEST(Store, RefusesAFileThatIsNotADatabase) {
  ScratchDir dir;
  const std::string path = dir.file("notes.txt");
  const std::string text(8192, 'x');
  write_file(path, text);
  ErrorItem error = user_error([&] { Store::open(path); });
  EXPECT_EQ(error.where, path);
  EXPECT_NE(error.what.find("not a SQLite database"), std::string::npos) << error.what;
  EXPECT_EQ(faultline::testing::read_file(path), text);  // left untouched
}

TEST(Store, RefusesAnotherProgramsDatabase) {
  ScratchDir dir;
  const std::string path = dir.file("other.db");
  Store::raw_exec_for_tests(path, "CREATE TABLE accounts (id INTEGER PRIMARY KEY)");
  ErrorItem error = user_error([&] { Store::open(path); });
  EXPECT_EQ(error.where, path);
  EXPECT_NE(error.what.find("not a faultline store"), std::string::npos) << error.what;
  // Left as it was: opening it as a store wrote WAL mode into its header (byte 19) before the
  // check, so a mistyped --db changed another program's file.
  const std::string bytes = faultline::testing::read_file(path);
  ASSERT_GT(bytes.size(), 19u);
  EXPECT_EQ(static_cast<int>(bytes[18]), 1);  // 1: rollback journal, 2: WAL
  EXPECT_EQ(static_cast<int>(bytes[19]), 1);
}

// A damaged page is written around until something reads it: a gate passed into a corrupt file
// and failed only when a write touched the page, after its training. quick_check finds it.
TEST(Store, ADamagedPageIsFoundBeforeAnythingIsWritten) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  {
    Store store = Store::open(path);
    std::vector<StepRecord> steps(3000);
    for (size_t i = 0; i < steps.size(); ++i) steps[i].step = static_cast<int64_t>(i) + 1;
    store.add_steps(store.create_run(sample_run()), steps);
    EXPECT_NO_THROW(store.check_not_damaged());
  }
  std::string bytes = faultline::testing::read_file(path);
  ASSERT_GT(bytes.size(), 4u * 16384);
  for (size_t i = 3 * 16384; i < 3 * 16384 + 8000; ++i) bytes[i] = static_cast<char>(0xde);
  write_file(path, bytes);
  Store store = Store::open(path);
  ErrorItem error = user_error([&] { store.check_not_damaged(); });
  EXPECT_EQ(error.what.rfind("the store file is corrupt (quick_check: ", 0), 0u) << error.what;
  EXPECT_EQ(error.where, path);
}

TEST(Store, RefusesAMissingDirectoryNamingThePath) {
  ScratchDir dir;
  const std::string path = dir.file("no/such/dir/f.db");
  EXPECT_EQ(user_error([&] { Store::open(path); }).where, path);
}

TEST(Store, LaterMigrationsRunInOrderAndKeepData) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  const int64_t id = Store::open(path).create_run(sample_run());
  {
    Store store = Store::open_with_extra_migrations_for_tests(
        path, {"ALTER TABLE runs ADD COLUMN note TEXT", "UPDATE runs SET note = 'two'"});
    EXPECT_EQ(store.schema_version(), kSchemaVersion + 2);
    EXPECT_EQ(store.get_run(id)->config_hash, "0123456789abcdef");
  }
  // This build's schema is now older than the file's.
  EXPECT_EQ(user_error([&] { Store::open(path); }).where, path);
}

TEST(Store, AFailingMigrationStepIsRolledBack) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  const int64_t id = Store::open(path).create_run(sample_run());
  EXPECT_THROW(Store::open_with_extra_migrations_for_tests(
                   path, {"CREATE TABLE extra (x)", "CREATE TABLE extra (x)"}),
               std::runtime_error);
  // The first step committed, the failing second left nothing behind.
  Store store = Store::open_with_extra_migrations_for_tests(path, {"CREATE TABLE extra (x)"});
  EXPECT_EQ(store.schema_version(), kSchemaVersion + 1);
  EXPECT_TRUE(store.get_run(id).has_value());
}

TEST(Store, InTransactionCommitsTogetherOrNotAtAll) {
  ScratchDir dir;
  Store store = Store::open(dir.file("f.db"));
  EXPECT_THROW(store.in_transaction([&] {
    store.create_run(sample_run());
    throw std::runtime_error("ingest failed");
  }),
               std::runtime_error);
  EXPECT_TRUE(store.list_runs().empty());

  store.in_transaction([&] {
    store.create_run(sample_run());
    try {  // a nested scope rolls back alone
      store.in_transaction([&] {
        store.create_run(sample_run());
        throw std::runtime_error("inner");
      });
    } catch (const std::runtime_error&) {
    }
    store.create_run(sample_run());
  });
  EXPECT_EQ(store.list_runs().size(), 2u);
}

TEST(Store, WaitingPastTheBusyTimeoutIsAUserError) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  Store writer = Store::open(path);
  Options impatient;
  impatient.busy_timeout_ms = 50;
  Store other = Store::open(path, impatient);
  writer.in_transaction([&] {
    writer.create_run(sample_run());
    ErrorItem error = user_error([&] { other.create_run(sample_run()); });
    EXPECT_EQ(error.where, path);
    EXPECT_NE(error.what.find("locked"), std::string::npos) << error.what;
    EXPECT_FALSE(error.hint.empty());
  });
  other.create_run(sample_run());  // the lock is gone with the transaction
  EXPECT_EQ(writer.list_runs().size(), 2u);
}

TEST(Store, InterruptedRunsKeepTheirRows) {
  ScratchDir dir;
  const std::string path = dir.file("f.db");
  int64_t crashed = 0, finished = 0;
  {
    Store store = Store::open(path);
    crashed = store.create_run(sample_run());
    finished = store.create_run(sample_run());
    std::vector<StepRecord> steps(10);
    for (int i = 0; i < 10; ++i) steps[static_cast<size_t>(i)].step = i;
    store.add_steps(crashed, steps);
    store.finish_run(finished, RunInfo{});
    // The harness dies here: the run is never finished.
  }
  Store store = Store::open(path);
  EXPECT_EQ(store.running_run_ids(), std::vector<int64_t>{crashed});
  EXPECT_EQ(store.mark_interrupted({crashed, finished, 12345}), 1);
  EXPECT_EQ(store.mark_interrupted({crashed}), 0);
  RunInfo run = *store.get_run(crashed);
  EXPECT_EQ(run.status, RunStatus::Interrupted);
  EXPECT_FALSE(run.ended_at.empty());
  EXPECT_EQ(store.get_run(finished)->status, RunStatus::Finished);
  EXPECT_EQ(store.steps(crashed).size(), 10u);
  EXPECT_TRUE(store.running_run_ids().empty());
}

TEST(Store, StatusNamesRoundTrip) {
  for (RunStatus status : {RunStatus::Running, RunStatus::Finished, RunStatus::Interrupted}) {
    EXPECT_EQ(run_status_from_string(to_string(status)), status);
  }
  EXPECT_THROW(run_status_from_string("done"), std::invalid_argument);
}

}  // namespace
}  // namespace faultline::store
