// CSV and JSON Lines writers for stored records. A column a trainer did not report stays empty
// (CSV) or null (JSON), never 0: an absent value is not a measured one.
#include "harness/browse/export.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/duration.hpp"
#include "common/enum_names.hpp"

namespace faultline::harness {

namespace {

using nlohmann::json;

constexpr std::pair<ExportFormat, const char*> kFormats[] = {{ExportFormat::Csv, "csv"},
                                                             {ExportFormat::Jsonl, "jsonl"}};
constexpr std::pair<ExportWhat, const char*> kWhats[] = {{ExportWhat::Metrics, "metrics"},
                                                         {ExportWhat::Trials, "trials"},
                                                         {ExportWhat::Events, "events"},
                                                         {ExportWhat::Gpu, "gpu"}};

// JSON holds no NaN: the protocol's own spelling, as a string.
json json_number(double value) {
  return std::isfinite(value) ? json(value) : json(csv_number(value));
}

template <typename T>
std::string csv_optional(const std::optional<T>& value) {
  if (!value) return "";
  if constexpr (std::is_floating_point_v<T>)
    return csv_number(*value);
  else
    return std::to_string(*value);
}

template <typename T>
json json_optional(const std::optional<T>& value) {
  if (!value) return json();
  if constexpr (std::is_floating_point_v<T>)
    return json_number(*value);
  else
    return json(*value);
}

constexpr const char* kMetricColumns =
    "run_id,rank,step,t,loss,grad_norm,lr,step_ms,data_ms,comm_ms,tokens,mem_bytes,"
    "mem_total_bytes,param_norm,update_ratio,nonfinite,collectives,skipped,loss_scale";

json step_json(int64_t run_id, const StepRecord& s) {
  return {{"run_id", run_id},
          {"rank", s.rank},
          {"step", s.step},
          {"t", json_number(s.t)},
          {"loss", json_number(s.loss)},
          {"grad_norm", s.has_grad_norm ? json_number(s.grad_norm) : json()},
          {"lr", s.has_lr ? json_number(s.lr) : json()},
          {"step_ms", json_optional(s.step_ms)},
          {"data_ms", json_optional(s.data_ms)},
          {"comm_ms", json_optional(s.comm_ms)},
          {"tokens", json_optional(s.tokens)},
          {"mem_bytes", json_optional(s.mem_bytes)},
          {"mem_total_bytes", json_optional(s.mem_total_bytes)},
          {"param_norm", json_optional(s.param_norm)},
          {"update_ratio", json_optional(s.update_ratio)},
          {"nonfinite", json_optional(s.nonfinite)},
          {"collectives", json_optional(s.collectives)},
          {"skipped", s.skipped},
          {"loss_scale", json_optional(s.loss_scale)}};
}

std::string step_csv(int64_t run_id, const StepRecord& s) {
  const std::vector<std::string> cells = {std::to_string(run_id),
                                          std::to_string(s.rank),
                                          std::to_string(s.step),
                                          csv_number(s.t),
                                          csv_number(s.loss),
                                          s.has_grad_norm ? csv_number(s.grad_norm) : "",
                                          s.has_lr ? csv_number(s.lr) : "",
                                          csv_optional(s.step_ms),
                                          csv_optional(s.data_ms),
                                          csv_optional(s.comm_ms),
                                          csv_optional(s.tokens),
                                          csv_optional(s.mem_bytes),
                                          csv_optional(s.mem_total_bytes),
                                          csv_optional(s.param_norm),
                                          csv_optional(s.update_ratio),
                                          csv_optional(s.nonfinite),
                                          csv_optional(s.collectives),
                                          s.skipped ? "1" : "0",
                                          csv_optional(s.loss_scale)};
  return fmt::format("{}", fmt::join(cells, ","));
}

// A gpu record's columns in order, with their values: one list for both formats.
std::vector<std::pair<const char*, json>> gpu_columns(int64_t run_id, const GpuRecord& g) {
  return {{"run_id", run_id},
          {"rank", g.rank},
          {"t", json_number(g.t)},
          {"device", g.device},
          {"unix_t0", json_number(g.unix_t0)},
          {"unix_t1", json_number(g.unix_t1)},
          {"busy_ms", json_number(g.busy_ms)},
          {"compute_ms", json_number(g.compute_ms)},
          {"nccl_ms", json_number(g.nccl_ms)},
          {"overlap_ms", json_number(g.overlap_ms)},
          {"memcpy_ms", json_number(g.memcpy_ms)},
          {"idle_ms", json_number(g.idle_ms)},
          {"max_gap_ms", json_number(g.max_gap_ms)},
          {"kernels", g.kernels},
          {"nccl_kernels", g.nccl_kernels},
          {"memcpys", g.memcpys},
          {"late", g.late}};
}

json parsed_or_text(const std::string& text) {
  auto parsed = json::parse(text, nullptr, false);
  return parsed.is_discarded() ? json(text) : parsed;
}

}  // namespace

const char* to_string(ExportFormat format) {
  return name_of(kFormats, format);
}
const char* to_string(ExportWhat what) {
  return name_of(kWhats, what);
}
std::optional<ExportFormat> export_format_from_string(const std::string& text) {
  return value_of(kFormats, text);
}
std::optional<ExportWhat> export_what_from_string(const std::string& text) {
  return value_of(kWhats, text);
}
std::vector<std::string> export_format_names() {
  return names_of(kFormats);
}
std::vector<std::string> export_what_names() {
  return names_of(kWhats);
}

std::string csv_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{}", value);  // shortest round-trip representation
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

void write_metrics(std::ostream& out, ExportFormat format, int64_t run_id,
                   const std::vector<StepRecord>& steps) {
  if (format == ExportFormat::Csv) out << kMetricColumns << '\n';
  for (const auto& step : steps)
    out << (format == ExportFormat::Csv ? step_csv(run_id, step) : step_json(run_id, step).dump())
        << '\n';
}

void write_events(std::ostream& out, ExportFormat format, int64_t run_id,
                  const std::vector<EventRecord>& events,
                  const std::vector<AnomalyRecord>& anomalies) {
  // One shape for both: an anomaly's name is its kind, its record the whole line.
  struct Row {
    const char* type;
    int rank;
    double t;
    std::optional<int64_t> step;
    std::string name, record;
  };
  std::vector<Row> rows;
  for (const auto& e : events) rows.push_back({"event", e.rank, e.t, e.step, e.name, e.json});
  for (const auto& a : anomalies) rows.push_back({"anomaly", a.rank, a.t, a.step, a.kind, a.json});
  if (format == ExportFormat::Csv) out << "run_id,type,rank,t,step,name,record\n";
  for (const auto& row : rows) {
    if (format == ExportFormat::Csv)
      out << fmt::format("{},{},{},{},{},{},{}\n", run_id, row.type, row.rank, csv_number(row.t),
                         csv_optional(row.step), csv_field(row.name), csv_field(row.record));
    else
      out << json{{"run_id", run_id},
                  {"type", row.type},
                  {"rank", row.rank},
                  {"t", json_number(row.t)},
                  {"step", json_optional(row.step)},
                  {"name", row.name},
                  {"record", parsed_or_text(row.record)}}
                 .dump()
          << '\n';
  }
}

void write_trials(std::ostream& out, ExportFormat format, const std::vector<TrialRow>& trials) {
  if (format == ExportFormat::Csv)
    out << "run_id,parent,started_at,seconds,ranks,steps_run,verdict,first_failure,reused_key,"
           "config_path\n";
  for (const auto& trial : trials) {
    const auto& run = trial.run;
    const auto seconds = seconds_between(run.started_at, run.ended_at);
    std::string failure;
    if (!run.failures.empty())
      failure = fmt::format("{} at step {}", run.failures.front().kind, run.failures.front().step);
    if (format == ExportFormat::Csv) {
      out << fmt::format("{},{},{},{},{},{},{},{},{},{}\n", run.id, csv_field(run.parent),
                         run.started_at, seconds ? csv_number(*seconds) : "", run.ranks,
                         trial.steps_run, run.verdict, csv_field(failure),
                         trial.cached ? trial.cached->spec_hash : "", csv_field(run.config_path));
      continue;
    }
    out << json{{"run_id", run.id},
                {"parent", run.parent},
                {"started_at", run.started_at},
                {"seconds", seconds ? json(*seconds) : json()},
                {"ranks", run.ranks},
                {"steps_run", trial.steps_run},
                {"verdict", run.verdict},
                {"first_failure", failure.empty() ? json() : json(failure)},
                {"spec", trial.cached ? parsed_or_text(trial.cached->spec_json) : json()},
                {"config_path", run.config_path}}
               .dump()
        << '\n';
  }
}

void write_gpu_header(std::ostream& out, ExportFormat format) {
  if (format != ExportFormat::Csv) return;
  std::vector<std::string> names;
  for (const auto& [name, value] : gpu_columns(0, GpuRecord{})) names.push_back(name);
  out << fmt::format("{}\n", fmt::join(names, ","));
}

void write_gpu_row(std::ostream& out, ExportFormat format, int64_t run_id,
                   const GpuRecord& interval) {
  const auto columns = gpu_columns(run_id, interval);
  if (format == ExportFormat::Jsonl) {
    out << json(json::object_t(columns.begin(), columns.end())).dump() << '\n';
    return;
  }
  std::vector<std::string> cells;
  for (const auto& [name, value] : columns)
    cells.push_back(value.is_number_float() ? csv_number(value.get<double>())
                    : value.is_string()     ? value.get<std::string>()  // nan, inf
                                            : value.dump());
  out << fmt::format("{}\n", fmt::join(cells, ","));
}

}  // namespace faultline::harness
