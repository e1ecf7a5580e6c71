// How a supervised trial ended, as failures (crash, hang, oom, a halt no record shows) or as
// the reason it could not be judged (the machine's, or bad input: the trainer's refusal).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "harness/contract/trainer_contract.hpp"
#include "harness/launch/launcher.hpp"
#include "harness/launch/supervisor.hpp"
#include "harness/trial/trial.hpp"
#include "probes/detectors/failure.hpp"

namespace faultline::harness {

// The last whole lines of a log, at most `bytes` and 15 lines of it: what a trainer said last
// (argparse's one-line error comes after its usage block; a traceback's last line is its error).
std::string log_tail(const std::string& path, size_t bytes = 2000);

// How the supervised run ended, as failures; or, in `infra_detail` and `infra_cause`, why it
// could not be judged.
void classify_exit(const SupervisedResult& result, const SuperviseOptions& watch,
                   const contract::TrainerContract& trainer,
                   std::vector<detectors::Failure>& failures, std::string& infra_detail,
                   InfraCause& infra_cause, const std::vector<RankLaunch>& ranks);

// A crash for an exit that claims a halt (3, 4) no record shows; nullopt otherwise.
std::optional<detectors::Failure> unproven_halt(const SupervisedResult& result,
                                                const contract::TrainerContract& trainer,
                                                const std::vector<detectors::Failure>& failures);

// A job or step the scheduler ended (Slurm's TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, CANCELLED).
void classify_scheduler_end(const SchedulerReport& report, const SupervisedResult& result,
                            std::vector<detectors::Failure>& failures, std::string& infra_detail);

// Why a run that exited cleanly was not judged (no step record, or short of the steps asked);
// "" when it trained what it was asked.
std::string not_trained(const contract::TrainerContract& trainer, const TrialSpec& spec,
                        int64_t steps_asked, int64_t step_records, int64_t last_step,
                        const std::string& log_path);

// Why a replay is not one: a rank asked to resume whose first step record is at or before the
// checkpoint's step; "" when every rank began after it.
std::string ignored_resume(const TrialSpec& spec, const SupervisedResult& result,
                           const contract::TrainerContract& trainer);

}  // namespace faultline::harness
