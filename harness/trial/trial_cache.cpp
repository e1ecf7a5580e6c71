// The trial cache: identity and hash of a spec, Outcome <-> JSON, and reuse of stored results.
#include "harness/trial/trial_cache.hpp"

#include <atomic>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "common/hash.hpp"
#include "store/store.hpp"

namespace faultline::store {

void to_json(nlohmann::json& json, const RankMalformed& malformed) {
  json = {{"rank", malformed.rank},
          {"lines", malformed.lines},
          {"first_line", malformed.first_line},
          {"first_error", malformed.first_error}};
}

void from_json(const nlohmann::json& json, RankMalformed& malformed) {
  json.at("rank").get_to(malformed.rank);
  json.at("lines").get_to(malformed.lines);
  json.at("first_line").get_to(malformed.first_line);
  json.at("first_error").get_to(malformed.first_error);
}

}  // namespace faultline::store

namespace faultline::harness {

namespace {

// XXH64 of a file's bytes, "" when it cannot be read (then the path alone identifies it).
std::string file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  Hasher hasher;
  char buffer[1 << 16];
  while (in) {
    in.read(buffer, sizeof buffer);
    hasher.update(buffer, static_cast<size_t>(in.gcount()));
  }
  return hex64(hasher.digest());
}

Verdict verdict_from_string(const std::string& text) {
  if (auto verdict = parse_verdict(text)) return *verdict;
  throw std::invalid_argument("unknown verdict '" + text + "' in a stored trial");
}

nlohmann::json optional_number(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::optional<double> read_optional(const nlohmann::json& json, const char* key) {
  if (!json.contains(key) || json.at(key).is_null()) return std::nullopt;
  return json.at(key).get<double>();
}

}  // namespace

nlohmann::json trial_identity(const TrialSpec& spec, const std::string& trainer,
                              const std::string& judge, const std::string& reference) {
  nlohmann::json identity = {{"v", 1},
                             {"config_path", spec.config_path},
                             {"config_digest", file_digest(spec.config_path)},
                             {"overrides", spec.overrides},
                             {"ranks", spec.ranks},
                             {"stop_after", spec.stop_after},
                             {"data_fraction", spec.data_fraction},
                             {"resume", spec.resume},
                             {"resume_digest", spec.resume.empty() ? "" : file_digest(spec.resume)},
                             {"trainer", trainer},
                             {"trainer_digest", file_digest(trainer)},
                             {"judge_digest", hex64(hash_text(judge))}};
  // Which host each rank runs on decides a host-tied fault; absent keeps older identities.
  if (!spec.hosts.empty()) identity["hosts"] = spec.hosts;
  // The k-th identical run of a spec (a vote, a determinism check) is a trial of its own, so a
  // killed search resumes its votes too.
  if (spec.repeat > 0) identity["repeat"] = spec.repeat;
  if (!reference.empty()) identity["reference_digest"] = reference;
  return identity;
}

std::string trial_hash(const nlohmann::json& identity) {
  return hex64(hash_text(identity.dump()));
}

nlohmann::json to_json(const Outcome& outcome) {
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& failure : outcome.failures)
    failures.push_back({{"kind", failure.kind},
                        {"step", failure.step},
                        {"rank", failure.rank},
                        {"detail", failure.detail},
                        {"shown_by", failure.shown_by}});
  return {{"verdict", to_string(outcome.verdict)},
          {"failures", failures},
          {"run_id", outcome.run_id},
          {"infra_detail", outcome.infra_detail},
          {"out_dir", outcome.out_dir},
          {"last_step", outcome.last_step},
          {"steps_run", outcome.steps_run},
          {"ranks", outcome.ranks},
          {"first_loss", optional_number(outcome.first_loss)},
          {"last_loss", optional_number(outcome.last_loss)},
          {"tokens_per_s", outcome.tokens_per_s},
          {"skipped_steps", outcome.skipped_steps},
          {"wall_s", outcome.wall_s},
          {"queue_wait_s", outcome.queue_wait_s},
          {"run_s", outcome.run_s()},
          {"malformed", outcome.malformed}};
}

Outcome outcome_from_json(const nlohmann::json& json) {
  Outcome outcome;
  outcome.verdict = verdict_from_string(json.at("verdict").get<std::string>());
  for (const auto& failure : json.at("failures"))
    outcome.failures.push_back({failure.at("kind").get<detectors::FailureKind>(),
                                failure.at("step").get<int64_t>(), failure.at("rank").get<int>(),
                                failure.at("detail").get<std::string>(),
                                failure.value("shown_by", int64_t{-1})});
  outcome.run_id = json.at("run_id").get<int64_t>();
  outcome.infra_detail = json.at("infra_detail").get<std::string>();
  outcome.out_dir = json.at("out_dir").get<std::string>();
  outcome.last_step = json.at("last_step").get<int64_t>();
  outcome.steps_run = json.value("steps_run", int64_t{0});
  outcome.ranks = json.value("ranks", 1);
  outcome.first_loss = read_optional(json, "first_loss");
  outcome.last_loss = read_optional(json, "last_loss");
  outcome.tokens_per_s = json.at("tokens_per_s").get<double>();
  outcome.skipped_steps = json.value("skipped_steps", int64_t{0});  // none cached before fp16
  outcome.wall_s = json.at("wall_s").get<double>();
  outcome.queue_wait_s = json.value("queue_wait_s", 0.0);  // none before the Slurm launcher
  // Outcomes cached before malformed lines were counted have none.
  outcome.malformed = json.value("malformed", std::vector<MalformedLines>{});
  return outcome;
}

TrialCache::TrialCache(store::Store& store, TrialRunner& runner, std::string trainer,
                       std::string judge)
    : store_(store), runner_(runner), trainer_(std::move(trainer)), judge_(std::move(judge)) {}

std::string reference_digest(const std::vector<std::vector<StepRecord>>& reference) {
  // The losses decide the verdicts, not which runs they came from: a deterministic reference run
  // again gives the same digest, so a resumed search reuses its trials.
  Hasher hasher;
  for (const auto& run : reference) {
    for (const auto& record : run) {
      hasher.update(&record.step, sizeof record.step);
      hasher.update(&record.rank, sizeof record.rank);
      hasher.update(&record.loss, sizeof record.loss);
    }
    hasher.update("|", 1);
  }
  return hex64(hasher.digest());
}

void TrialCache::judge_against(int64_t reference_run) {
  auto reference = std::make_shared<const std::vector<std::vector<StepRecord>>>(
      std::vector<std::vector<StepRecord>>{store_.steps(reference_run)});
  reference_ = reference_digest(*reference);
  runner_.judge_against(std::move(reference));
}

std::optional<Outcome> TrialCache::stored(const std::string& hash) const {
  auto trial = store_.find_trial(hash);
  if (!trial || !trial->outcome_json) return std::nullopt;
  Outcome outcome = outcome_from_json(nlohmann::json::parse(*trial->outcome_json));
  // A reused trial's files must still be there: later trials resume from its checkpoints.
  if (!std::filesystem::exists(outcome.out_dir) ||
      std::filesystem::exists(std::filesystem::path(outcome.out_dir) / kPrunedNote))
    return std::nullopt;
  return outcome;
}

nlohmann::json TrialCache::identity_of(const TrialSpec& spec) const {
  nlohmann::json identity = trial_identity(spec, trainer_, judge_, reference_);
  // Absent on this machine: local trials keep the identities stored before placements counted.
  if (const std::string placement = runner_.launcher().placement(); !placement.empty())
    identity["placement"] = placement;
  return identity;
}

CachedOutcome TrialCache::run(const TrialSpec& spec, CacheUse use) {
  const nlohmann::json identity = identity_of(spec);
  const std::string hash = trial_hash(identity);
  if (use == CacheUse::Reuse) {
    if (auto outcome = stored(hash)) {
      ++trials_reused_;
      return {*outcome, true};
    }
  }
  // The trial's row is stored with the run's end, in one transaction (TrialRunner::run).
  Outcome outcome = runner_.run(spec, [&](const Outcome& finished) {
    if (!finished.interrupted && finished.verdict != Verdict::InfraError)
      store_.put_trial(hash, identity.dump(), to_json(finished).dump(), finished.run_id);
  });
  ++trials_run_;
  steps_executed_ += outcome.steps_run;
  return {outcome, false};
}

std::vector<CachedOutcome> TrialCache::run_all(const std::vector<TrialSpec>& specs, int jobs,
                                               CacheUse use) {
  std::vector<CachedOutcome> results(specs.size());
  std::vector<size_t> to_run;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto outcome =
        use == CacheUse::Reuse ? stored(trial_hash(identity_of(specs[i]))) : std::nullopt;
    if (outcome) {
      ++trials_reused_;
      results[i] = {*outcome, true};
    } else {
      to_run.push_back(i);
    }
  }
  const size_t workers = std::min<size_t>(static_cast<size_t>(std::max(1, jobs)), to_run.size());
  if (workers <= 1 || !runner_.launcher().clone()) {
    for (size_t i : to_run) results[i] = run(specs[i], CacheUse::Rerun);
    return results;
  }
  // A store handle and its prepared statements belong to one thread: each worker opens its own.
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(workers);
  std::vector<TrialCache*> caches(workers, nullptr);
  std::vector<int64_t> run_counts(workers, 0), step_counts(workers, 0);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      try {
        store::Store store = store::Store::open(store_.path());
        auto launcher = runner_.launcher().clone();
        TrialRunner runner(store, *launcher, runner_.options());
        TrialCache cache(store, runner, trainer_, judge_);
        for (size_t k = next++; k < to_run.size(); k = next++)
          results[to_run[k]] = cache.run(specs[to_run[k]], CacheUse::Rerun);
        run_counts[w] = cache.trials_run();
        step_counts[w] = cache.steps_executed();
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (size_t w = 0; w < workers; ++w) {
    trials_run_ += run_counts[w];
    steps_executed_ += step_counts[w];
  }
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
  return results;
}

}  // namespace faultline::harness
