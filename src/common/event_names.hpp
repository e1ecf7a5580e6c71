// The names of the metrics protocol's life-cycle events (docs/metrics-protocol.md, `event`),
// spelled once for the trainer that writes them and the harness that looks for them.
#pragma once

namespace faultline {

constexpr const char* kStartEvent = "start";            // the run's config and environment
constexpr const char* kCheckpointEvent = "checkpoint";  // a checkpoint written: its step and path
constexpr const char* kResumeEvent = "resume";          // the run went on from a checkpoint
constexpr const char* kEndEvent = "end";                // how it ended (common/end_status.hpp)
constexpr const char* kCollectiveEvent = "collective";  // a heartbeat before a collective
constexpr const char* kBatchEvent = "batch";            // the global samples of a step

}  // namespace faultline
