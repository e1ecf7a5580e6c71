// `faultline export`: a run's stored records (or a finding's) as CSV or JSON Lines, one row per
// step and rank with the values as stored; NaN and infinities are spelled nan, inf, -inf as the
// metrics protocol spells them. Pure formatting: the caller reads the store and opens the file.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/metrics_record.hpp"
#include "store/store.hpp"

namespace faultline::harness {

enum class ExportFormat { Csv, Jsonl };
enum class ExportWhat { Metrics, Trials, Events, Gpu };

const char* to_string(ExportFormat format);
const char* to_string(ExportWhat what);
std::optional<ExportFormat> export_format_from_string(const std::string& text);
std::optional<ExportWhat> export_what_from_string(const std::string& text);
std::vector<std::string> export_format_names();  // for the error that names the valid ones
std::vector<std::string> export_what_names();

// A number as CSV holds it: the shortest text that reads back to the same double; nan, inf, -inf.
std::string csv_number(double value);
// A CSV field: quoted (with doubled quotes) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text);

// The step records of one run, ordered by rank then step.
void write_metrics(std::ostream& out, ExportFormat format, int64_t run_id,
                   const std::vector<StepRecord>& steps);
// Its events and anomalies, in the order stored (events first).
void write_events(std::ostream& out, ExportFormat format, int64_t run_id,
                  const std::vector<EventRecord>& events,
                  const std::vector<AnomalyRecord>& anomalies);

// Its gpu records (the CUPTI probe's intervals) as stored: the header (CSV), then a row each
// (a day's job has millions: the caller streams them from the store).
void write_gpu_header(std::ostream& out, ExportFormat format);
void write_gpu_row(std::ostream& out, ExportFormat format, int64_t run_id,
                   const GpuRecord& interval);

// One trial: its run and the spec and outcome the trial cache stored for it (or none).
struct TrialRow {
  store::RunInfo run;
  int64_t steps_run = 0;  // steps per rank it stored
  std::optional<store::StoredTrial> cached;
};
void write_trials(std::ostream& out, ExportFormat format, const std::vector<TrialRow>& trials);

}  // namespace faultline::harness
