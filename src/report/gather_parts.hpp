// What both of report_gather's readers (a finding's, a run's) take from the store: a run, its
// records as plots need them, facts out of stored JSON, and the reference band under the loss.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/plot_data.hpp"
#include "report/report_gather.hpp"
#include "report/report_model.hpp"
#include "report/step_thinner.hpp"
#include "store/store.hpp"

namespace faultline::report::gather {

// Throws UserError when the run is not stored.
store::RunInfo load_run(const store::Store& store, int64_t run_id);

// A run's records as its plots need them, read as a stream and thinned when long (StepThinner),
// but whole around the bad step: the report of a big job does not hold every record.
StepThinner plotted_records(const store::Store& store, int64_t run_id,
                            std::optional<int64_t> bad_step);

// A stored JSON value as a report shows it: strings bare, arrays joined, floats to 6 digits.
std::string text_of(const nlohmann::json& value);
// Adds `label: value` unless the value is null or an empty array.
void add_fact(std::vector<Fact>& facts, const std::string& label, const nlohmann::json& value);
// A detail's first line is a fact; the lines below it (the stacks a hung rank wrote) are a block
// of their own, kept as lines.
void add_detail(Report& report, const std::string& detail);

// The seed band of the reference named in `options`, or of the one reference stored for the
// subject's recipe; several such references are a note. Throws UserError for an unknown name.
std::optional<Band> reference_band(const store::Store& store, const store::RunInfo& subject,
                                   const GatherOptions& options, std::vector<std::string>& notes);

}  // namespace faultline::report::gather
