// What both report readers take from the store (gather_parts.hpp).
#include "report/gather_parts.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/error.hpp"
#include "common/text.hpp"
#include "report/plot_data.hpp"

namespace faultline::report::gather {

using nlohmann::json;

StepThinner plotted_records(const store::Store& store, int64_t run_id,
                            std::optional<int64_t> bad_step) {
  const auto span = store.step_span(run_id);
  StepThinner thinner(span ? span->first : 1, span ? span->second : 0, kMaxPlotBuckets, bad_step);
  store.each_step(run_id, [&](const StepRecord& record) { thinner.add(record); });
  return thinner;
}

std::string text_of(const json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    std::vector<std::string> parts;
    for (const auto& item : value) parts.push_back(text_of(item));
    return fmt::format("{}", fmt::join(parts, ", "));
  }
  if (value.is_number_float()) return fmt::format("{:.6g}", value.get<double>());
  return value.dump();
}

void add_fact(std::vector<Fact>& facts, const std::string& label, const json& value) {
  if (!value.is_null() && !(value.is_array() && value.empty()))
    facts.push_back({label, text_of(value)});
}

void add_detail(Report& report, const std::string& detail) {
  if (detail.empty()) return;
  const size_t end = detail.find('\n');
  add_fact(report.location, "detail", json(detail.substr(0, end)));
  if (end == std::string::npos) return;
  // The block without the indentation its lines share (a detail indents them under its line).
  std::vector<std::string> lines = split(detail.substr(end + 1), '\n');
  size_t common = std::string::npos;
  for (const auto& line : lines)
    if (const size_t first = line.find_first_not_of(' '); first != std::string::npos)
      common = std::min(common, first);
  for (auto& line : lines) line = line.size() >= common ? line.substr(common) : trim(line);
  report.detail_block = fmt::format("{}", fmt::join(lines, "\n"));
}

store::RunInfo load_run(const store::Store& store, int64_t run_id) {
  auto run = store.get_run(run_id);
  if (!run)
    throw UserError("no run " + std::to_string(run_id), store.path(), "see `faultline runs`");
  return *run;
}

std::optional<Band> reference_band(const store::Store& store, const store::RunInfo& subject,
                                   const GatherOptions& options, std::vector<std::string>& notes) {
  std::optional<store::ReferenceInfo> reference;
  if (!options.reference.empty()) {
    reference = store.get_reference(options.reference);
    if (!reference)
      throw UserError("no reference named '" + options.reference + "'", "--reference",
                      "see `faultline reference list`");
  } else {
    std::vector<store::ReferenceInfo> matching;
    for (auto& candidate : store.list_references())
      if (candidate.config_path == subject.config_path) matching.push_back(std::move(candidate));
    if (matching.size() == 1) reference = matching.front();
    if (matching.size() > 1)
      notes.push_back(fmt::format("{} references share this recipe; pick one with --reference",
                                  matching.size()));
  }
  if (!reference) return std::nullopt;
  // The band is of each run's lowest rank: only its records are kept as the run streams by (a
  // reference of big jobs would otherwise be every rank's every record at once).
  std::vector<std::vector<StepRecord>> runs;
  for (int64_t id : reference->run_ids) {
    auto& lowest = runs.emplace_back();
    store.each_step(id, [&](const StepRecord& record) {
      if (!lowest.empty() && record.rank > lowest.front().rank) return;
      if (!lowest.empty() && record.rank < lowest.front().rank) lowest.clear();
      lowest.push_back(record);
    });
  }
  return loss_band(fmt::format("reference '{}' ({} runs)", reference->name, runs.size()), runs);
}

}  // namespace faultline::report::gather
