// How findings are shown: the JSON document of `isolate --json` / `show F<id> --json`, the
// short human summary, and the `findings` and `repro` commands.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "store/store.hpp"

namespace CLI {
class App;
}

namespace faultline::cli {

// {"finding_id", "kind", "step", "rank", "phase", "where", "samples", "shards",
//  "config_culprit", "min_scale", "trials", "steps_executed", "repro"}; absent facts are null.
nlohmann::json finding_document(const store::FindingInfo& finding);
void print_finding(const store::FindingInfo& finding);

// "F12" / "f12" -> 12; nullopt when `text` does not name a finding.
std::optional<int64_t> finding_reference(const std::string& text);

void add_finding_commands(CLI::App& app, int& exit_code);

// `faultline show F<id>`.
void show_finding(const std::string& db, const std::string& reference, bool as_json);

}  // namespace faultline::cli
