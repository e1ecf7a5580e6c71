// The commit-bisection driver: validates the revisions, builds the DAG from git, resumes or
// starts the search, and feeds it one judged run after another, storing its state each time.
#include "harness/commits/commit_bisection.hpp"

#include <algorithm>
#include <map>

#include "bisect/drive.hpp"
#include "common/error.hpp"
#include "harness/isolate/isolate.hpp"
#include "harness/trial/trial_cache.hpp"
#include "store/store.hpp"

namespace faultline::harness {

namespace {

constexpr const char* kSearchKind = "bisect-commits";

// CommitBisect or FlakyBisect behind one face: the driver does not care which it runs.
class Search {
 public:
  Search(CommitSearch kind, const std::vector<bisect::Commit>& commits,
         const std::vector<std::string>& good, const std::string& bad,
         const bisect::FlakyOptions& options) {
    if (kind == CommitSearch::Flaky)
      flaky_.emplace(commits, good, bad, options);
    else
      plain_.emplace(commits, good, bad);
  }
  explicit Search(const nlohmann::json& state) {
    if (state.at("kind") == bisect::FlakyBisect::kStateKind)
      flaky_.emplace(bisect::FlakyBisect::from_json(state));
    else
      plain_.emplace(bisect::CommitBisect::from_json(state));
  }

  std::vector<std::string> next(std::size_t slots) {
    return flaky_ ? flaky_->next(slots) : plain_->next(slots);
  }
  void observe(const std::string& commit, bisect::Observation observation) {
    flaky_ ? flaky_->observe(commit, observation) : plain_->observe(commit, observation);
  }
  bool done() const { return flaky_ ? flaky_->done() : plain_->done(); }
  // Commits the first bad one may still be; nullopt for the flaky search, which weighs them all.
  std::optional<std::size_t> left() const {
    if (flaky_) return std::nullopt;
    return plain_->candidates().size();
  }
  nlohmann::json to_json() const { return flaky_ ? flaky_->to_json() : plain_->to_json(); }

  void report(CommitBisectReport& report) const {
    if (flaky_) {
      const auto result = flaky_->result();
      const bool confident = result.stop == bisect::FlakyStop::Confident;
      report.answer = !confident                                      ? CommitAnswer::Unsure
                      : result.answer == bisect::FlakyAnswer::Culprit ? CommitAnswer::Culprit
                                                                      : CommitAnswer::NoCulprit;
      report.culprit = result.culprit;
      report.parents = result.parents;
      report.confidence = result.confidence;
      report.executions = result.executions;
      report.skipped = result.skipped;
      report.verdicts = result.verdicts;
      return;
    }
    const auto result = plain_->result();
    switch (result.status) {
      case bisect::CommitBisectStatus::Found:
        report.answer = CommitAnswer::Culprit;
        report.confidence = 1.0;  // git's model: every verdict is taken as the truth
        break;
      case bisect::CommitBisectStatus::OnlySkippedLeft:
        report.answer = CommitAnswer::OnlySkipped;
        break;
      case bisect::CommitBisectStatus::Inconsistent:
        report.answer = CommitAnswer::Inconsistent;
        break;
      case bisect::CommitBisectStatus::Searching:
        report.answer = CommitAnswer::Unsure;
        break;
    }
    report.culprit = result.culprit;
    report.parents = result.parents;
    report.possible = result.possible;
    report.executions = result.evaluations;
    report.skipped = result.skipped;
    report.verdicts = result.verdicts;
  }

 private:
  std::optional<bisect::CommitBisect> plain_;
  std::optional<bisect::FlakyBisect> flaky_;
};

nlohmann::json flaky_options_json(const bisect::FlakyOptions& options) {
  return {{"p_bad_looks_good", options.p_bad_looks_good},
          {"p_good_looks_bad", options.p_good_looks_bad},
          {"prior_no_culprit", options.prior_no_culprit},
          {"confidence", options.confidence},
          {"max_executions", options.max_executions}};
}

// The latest unfinished search with these inputs, if any.
std::optional<store::SearchInfo> find_unfinished(const store::Store& store,
                                                 const std::string& key) {
  for (const auto& search : store.list_searches(-1)) {
    if (search.kind != kSearchKind || search.status != store::SearchStatus::Running) continue;
    const auto state = nlohmann::json::parse(search.state_json, nullptr, false);
    if (state.is_object() && state.value("key", "") == key) return search;
  }
  return std::nullopt;
}

// Git takes the ends as given; a range whose bad end passes (or good end fails) would still
// name a culprit, wrongly and with full confidence. One run of each end, cached like every
// verdict, says so first. The flaky search weighs the ends' runs itself; the good commit of
// --kind slow or loss_regression is run (and must pass) as the baseline or reference anyway.
// `goods`: each --good as given, and the commit it names.
std::vector<CommitRun> check_ends(CommitJudge& judge, const CommitBisectRequest& request,
                                  const std::vector<std::pair<std::string, std::string>>& goods,
                                  const std::string& bad) {
  std::vector<CommitRun> runs;
  if (request.search == CommitSearch::Flaky || request.ends == RangeEnds::Trust) return runs;
  const std::string trust = "or --ends trust to take the range's ends as given, as git does";
  runs.push_back(judge.judge(bad, 0));
  // Built but not run: the recipe, a --set or --trainer-path that no commit would run with.
  if (runs.back().observation == bisect::Observation::Skip &&
      runs.back().stage == CommitStage::Trial)
    throw UserError("the bad commit " + bad + " cannot be judged: " + runs.back().detail,
                    "--bad " + request.bad,
                    "every commit would be skipped alike: fix the recipe, --set or "
                    "--trainer-path, " +
                        trust);
  if (runs.back().observation == bisect::Observation::Good)
    throw UserError("the bad commit " + bad + " passes: " + runs.back().detail,
                    "--bad " + request.bad,
                    "give a commit where it fails (a failure that comes and goes needs "
                    "--flaky), " +
                        trust);
  const auto kind = request.judge.failure_kind;
  if (request.judge.kind == JudgeKind::Recipe &&
      (kind == detectors::FailureKind::Slow || kind == detectors::FailureKind::LossRegression))
    return runs;
  for (const auto& [rev, good] : goods) {
    runs.push_back(judge.judge(good, 0));
    if (runs.back().observation == bisect::Observation::Bad)
      throw UserError("the good commit " + good + " fails: " + runs.back().detail, "--good " + rev,
                      "give an older commit where it passes, " + trust);
  }
  return runs;
}

}  // namespace

const char* to_string(CommitAnswer answer) {
  switch (answer) {
    case CommitAnswer::Culprit:
      return "culprit";
    case CommitAnswer::NoCulprit:
      return "no_culprit";
    case CommitAnswer::OnlySkipped:
      return "only_skipped_left";
    case CommitAnswer::Inconsistent:
      return "inconsistent";
    case CommitAnswer::Unsure:
      return "unsure";
  }
  return "?";
}

CommitBisectReport bisect_commits(store::Store& store, const CommitBisectRequest& request,
                                  const CommitProgress& progress) {
  if (request.jobs < 1)
    throw UserError("--jobs " + std::to_string(request.jobs) + " is out of range", "--jobs",
                    "give at least 1");
  if (request.good.empty())
    throw UserError("no good revision", "--good", "give a commit known to be good");
  const GitRepo repo = GitRepo::open(request.repo);
  CommitBisectReport report;
  report.bad_commit = repo.resolve(request.bad, "--bad");
  std::vector<std::string> goods;
  std::vector<std::pair<std::string, std::string>> given_goods;  // as given, and resolved
  for (const auto& rev : request.good) {
    const std::string good = repo.resolve(rev, "--good");
    if (good == report.bad_commit)
      throw UserError("good and bad are the same commit " + good, "--good " + rev,
                      "give a good commit older than the bad one");
    if (!repo.is_ancestor(good, report.bad_commit))
      throw UserError("good commit " + good + " is not an ancestor of bad " + report.bad_commit,
                      "--good " + rev, "give a good commit from the bad commit's history");
    goods.push_back(good);
    if (std::none_of(given_goods.begin(), given_goods.end(),
                     [&](const auto& given) { return given.second == good; }))
      given_goods.emplace_back(rev, good);
  }
  report.good_commit = goods.front();
  std::sort(goods.begin(), goods.end());
  goods.erase(std::unique(goods.begin(), goods.end()), goods.end());
  const auto commits = repo.range(report.bad_commit, goods);
  report.candidates = commits.size();

  const BuildMemory memory =
      request.search == CommitSearch::Flaky ? BuildMemory::PerCommit : BuildMemory::PerRun;
  CommitJudge judge(store, repo, request.judge, memory);
  judge.remove_leftovers();
  bisect::FlakyOptions flaky = request.flaky;
  // The good commit's runs every verdict is judged against: before any verdict, the ends' too.
  std::vector<CommitRun> good_runs;
  if (request.judge.kind == JudgeKind::Recipe &&
      request.judge.failure_kind == detectors::FailureKind::LossRegression) {
    auto reference = judge.measure_reference(report.good_commit);
    good_runs = reference.runs;
    report.seed_flake_rate =
        static_cast<double>(reference.flagged) / static_cast<double>(reference.runs.size());
    // Measured on a few seeds: it only ever raises the rate given (a verdict must still say
    // something, so at most one half).
    flaky.p_good_looks_bad =
        std::min(0.5, std::max(flaky.p_good_looks_bad, *report.seed_flake_rate));
    if (request.search == CommitSearch::Flaky) report.p_good_looks_bad = flaky.p_good_looks_bad;
  }
  if (request.judge.kind == JudgeKind::Recipe &&
      request.judge.failure_kind == detectors::FailureKind::Slow)
    good_runs.push_back(judge.measure_baseline(report.good_commit));
  const std::vector<CommitRun> end_runs =
      check_ends(judge, request, given_goods, report.bad_commit);
  nlohmann::json identity = {{"v", 1},
                             {"good", goods},
                             {"bad", report.bad_commit},
                             {"search", request.search == CommitSearch::Flaky ? "flaky" : "plain"},
                             {"jobs", request.jobs},
                             {"judge", judge.identity()}};
  if (request.search == CommitSearch::Flaky) identity["flaky"] = flaky_options_json(flaky);
  const std::string key = trial_hash(identity);

  std::optional<Search> search;
  if (auto stored = find_unfinished(store, key)) {
    search.emplace(nlohmann::json::parse(stored->state_json).at("search"));
    report.search_id = stored->id;
    report.resumed = true;
  } else {
    search.emplace(request.search, commits, goods, report.bad_commit, flaky);
  }
  auto state = [&] {
    return nlohmann::json{{"key", key}, {"identity", identity}, {"search", search->to_json()}}
        .dump();
  };
  if (!report.resumed) report.search_id = store.create_search(kSearchKind, state());

  // The n-th run of a commit is a different cache entry from its first: --flaky reruns. A
  // resumed search's verdicts so far are read back from the store, to be listed and counted.
  std::map<std::string, int> runs_of;
  std::vector<CommitRun> resumed_runs;
  // (The state is held by name: a range-for over to_json().at(...) would outlive its json.)
  const nlohmann::json so_far = search->to_json();
  for (const auto& observation : so_far.at("observations")) {
    const auto commit = observation.at("commit").get<std::string>();
    resumed_runs.push_back(judge.judge(commit, runs_of[commit]++));
  }

  // Runs are announced once observed, so each line can say what is left after it (as git does).
  std::size_t announced = 0;
  auto announce = [&] {
    for (; announced < report.runs.size(); ++announced)
      if (progress)
        progress(report.runs[announced], static_cast<int>(announced + 1), report.candidates,
                 search->left());
  };
  auto record = [&](const CommitRun& run) { report.runs.push_back(run); };
  for (const auto& run : good_runs) record(run);
  for (const auto& run : end_runs) record(run);
  for (const auto& run : resumed_runs) record(run);
  try {
    announce();
    // Nothing testable left ends it too: the report says what is known.
    bisect::drive(
        *search, static_cast<std::size_t>(request.jobs),
        [&](const std::vector<std::string>& proposals) {
          std::vector<bisect::Observation> observed;
          for (const auto& commit : proposals) {
            const CommitRun run = judge.judge(commit, runs_of[commit]++);
            record(run);
            observed.push_back(run.observation);
          }
          return observed;
        },
        [&] {
          announce();
          store.update_search(report.search_id, state(), store::SearchStatus::Running);
        });
  } catch (const BisectAborted&) {
    store.update_search(report.search_id, state(), store::SearchStatus::Failed);
    throw;
  }
  store.update_search(report.search_id, state(), store::SearchStatus::Done);
  search->report(report);
  if (!report.culprit.empty()) report.culprit_subject = repo.subject(report.culprit);
  report.executed = judge.executed();
  report.reused = judge.reused();
  return report;
}

}  // namespace faultline::harness
