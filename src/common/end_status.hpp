// The end event of the metrics protocol (docs/metrics-protocol.md): its name and the statuses a
// trainer writes in it, spelled in one place.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/event_names.hpp"

namespace faultline {

enum class EndStatus {
  Ok,           // every step it was asked for trained
  Nonfinite,    // halted on a NaN/Inf
  DataAnomaly,  // halted on bad data
  Oom,          // out of memory (the Python helper)
  Error,        // an exception ended the script (the Python helper)
  Terminated,   // SIGTERM stopped it: its scheduler's time limit or a cancel (the Python helper)
};

const char* to_string(EndStatus status);
// nullopt for a status of a trainer's own that the protocol does not name.
std::optional<EndStatus> parse_end_status(std::string_view name);

// What an end event says. Read by the supervisor of a live trial and by an import alike.
struct EndEvent {
  std::optional<EndStatus> status;  // nullopt: none given, or one the protocol does not name
  std::string error;                // the exception that ended the script ("error"); "" if none
};

// From the end event's fields (parsed JSON; anything but an object gives an empty EndEvent).
EndEvent read_end_event(const nlohmann::json& fields);

}  // namespace faultline
