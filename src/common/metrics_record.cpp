// Metrics protocol parsing with nlohmann-json. Tolerant by design: the trainer may be a user's
// script, so only the fields a record cannot do without are required.
#include "common/metrics_record.hpp"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/enum_names.hpp"
#include "common/text.hpp"

namespace faultline {

namespace {
constexpr std::pair<AnomalyPhase, const char*> kPhaseNames[] = {
    {AnomalyPhase::Forward, "forward"},
    {AnomalyPhase::Backward, "backward"},
    {AnomalyPhase::Optimizer, "optimizer"},
    {AnomalyPhase::Loss, "loss"},
    {AnomalyPhase::Data, "data"}};
constexpr std::pair<AnomalyProbe, const char*> kProbeNames[] = {{AnomalyProbe::Cheap, "cheap"},
                                                                {AnomalyProbe::Full, "full"}};
constexpr std::pair<Fingerprinted, const char*> kFingerprintedNames[] = {
    {Fingerprinted::Params, "params"}, {Fingerprinted::Grads, "grads"}};
}  // namespace

const char* to_string(AnomalyPhase phase) {
  return name_of(kPhaseNames, phase);
}
std::optional<AnomalyPhase> parse_anomaly_phase(std::string_view text) {
  return value_of(kPhaseNames, text);
}
const char* to_string(AnomalyProbe probe) {
  return name_of(kProbeNames, probe);
}
const char* to_string(Fingerprinted what) {
  return name_of(kFingerprintedNames, what);
}
std::optional<Fingerprinted> parse_fingerprinted(std::string_view text) {
  return value_of(kFingerprintedNames, text);
}

namespace {
using nlohmann::json;

// "nan", "inf", "-inf" as the protocol spells them; also any case, a "+" and "infinity", as
// Python's str() and JavaScript write them: a NaN loss dropped as malformed would pass the run.
std::optional<double> nonfinite_text(const std::string& spelled) {
  std::string text = lowercase(spelled);
  const bool negative = !text.empty() && text.front() == '-';
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) text.erase(0, 1);
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (text == "inf" || text == "infinity")
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  return std::nullopt;
}

double real(const json& record, const char* key, double fallback = 0) {
  auto it = record.find(key);
  if (it == record.end() || it->is_null()) return fallback;
  if (it->is_number()) return it->get<double>();
  if (it->is_string())
    if (auto value = nonfinite_text(it->get<std::string>())) return *value;
  throw std::invalid_argument(std::string("field '") + key + "' is " + it->dump() +
                              ", not a number (a number, or \"nan\", \"inf\" or \"-inf\")");
}

// Python's json.dumps writes a non-finite float as a bare NaN, Infinity or -Infinity, which is
// not JSON: those tokens outside strings become the protocol's strings. Only tried on a line
// that did not parse, so a conforming line costs nothing. nullopt: no such token.
std::optional<std::string> quote_bare_nonfinite(std::string_view line) {
  std::string out;
  out.reserve(line.size() + 16);
  bool in_string = false, replaced_any = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size())
        out += line[++i];
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (auto [bare, quoted] : {std::pair{"-Infinity", "\"-inf\""},
                                std::pair{"Infinity", "\"inf\""}, std::pair{"NaN", "\"nan\""}}) {
      const std::string_view token(bare);
      if (line.substr(i, token.size()) == token) {
        out += quoted;
        i += token.size() - 1;
        replaced = replaced_any = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  if (!replaced_any) return std::nullopt;
  return out;
}

// The record, and in `text` the line as JSON (kept whole by events and anomalies): the line
// itself, or its quote_bare_nonfinite form, which later readers of the stored text can parse.
json parse_record(std::string_view line, std::string& text) {
  try {
    text = line;
    return json::parse(line);
  } catch (const json::parse_error&) {
    auto quoted = quote_bare_nonfinite(line);
    if (!quoted) throw;
    auto record = json::parse(*quoted, nullptr, false);
    if (record.is_discarded()) throw;
    text = std::move(*quoted);
    return record;
  }
}

// One element of a number array, with the same spelling of non-finite values.
double real(const json& array, size_t index) {
  json wrapped = {{"value", array.at(index)}};
  return real(wrapped, "value");
}

std::optional<double> maybe_real(const json& record, const char* key) {
  if (!record.contains(key) || record.at(key).is_null()) return std::nullopt;
  return real(record, key);
}

std::optional<int64_t> maybe_int(const json& record, const char* key) {
  auto value = maybe_real(record, key);
  if (!value) return std::nullopt;
  return static_cast<int64_t>(*value);
}

// A flag: true/false (or absent, or null: false). 0 and 1 are taken too, as Python writes them
// from an int.
bool flag(const json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end() || it->is_null()) return false;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_number_integer() && (*it == 0 || *it == 1)) return *it == 1;
  throw std::invalid_argument(std::string("field '") + key + "' is not true or false");
}

std::string text(const json& record, const char* key) {
  auto it = record.find(key);
  if (it == record.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

double required_real(const json& record, const char* key) {
  if (!record.contains(key))
    throw std::invalid_argument(std::string("missing field '") + key + "'");
  return real(record, key);
}

int64_t required_int(const json& record, const char* key) {
  return static_cast<int64_t>(required_real(record, key));
}
}  // namespace

ParsedLine parse_metrics_line(std::string_view line) {
  ParsedLine parsed;
  try {
    std::string line_json;
    json record = parse_record(line, line_json);
    if (!record.is_object()) throw std::invalid_argument("not a JSON object");
    if (record.value("v", 0) != 1) throw std::invalid_argument("unsupported protocol version");
    const std::string type = text(record, "type");
    const int rank = static_cast<int>(required_int(record, "rank"));
    const double t = real(record, "t");
    if (type == "step") {
      StepRecord step;
      step.rank = rank;
      step.t = t;
      step.step = required_int(record, "step");
      step.loss = real(record, "loss", std::nan(""));
      step.grad_norm = real(record, "grad_norm", std::nan(""));
      step.lr = real(record, "lr", std::nan(""));
      step.has_grad_norm = record.contains("grad_norm") && !record["grad_norm"].is_null();
      step.has_lr = record.contains("lr") && !record["lr"].is_null();
      step.step_ms = maybe_real(record, "step_ms");
      step.data_ms = maybe_real(record, "data_ms");
      step.comm_ms = maybe_real(record, "comm_ms");
      step.tokens = maybe_int(record, "tokens");
      step.mem_bytes = maybe_int(record, "mem_bytes");
      step.mem_total_bytes = maybe_int(record, "mem_total_bytes");
      step.param_norm = maybe_real(record, "param_norm");
      step.update_ratio = maybe_real(record, "update_ratio");
      step.nonfinite = maybe_int(record, "nonfinite");
      step.collectives = maybe_int(record, "collectives");
      step.cpu_ms = maybe_real(record, "cpu_ms");
      step.skipped = flag(record, "skipped");
      step.loss_scale = maybe_real(record, "loss_scale");
      parsed.record = step;
    } else if (type == "anomaly") {
      AnomalyRecord anomaly{rank,
                            t,
                            required_int(record, "step"),
                            text(record, "kind"),
                            text(record, "phase"),
                            text(record, "where"),
                            text(record, "detail"),
                            {},
                            {},
                            line_json};
      if (record.contains("samples") && record["samples"].is_array())
        for (const auto& sample : record["samples"])
          anomaly.samples.push_back(sample.get<uint64_t>());
      if (record.contains("shards") && record["shards"].is_array())
        for (const auto& shard : record["shards"])
          anomaly.shards.push_back(shard.get<std::string>());
      parsed.record = anomaly;
    } else if (type == "fingerprint") {
      FingerprintRecord fingerprint{rank,
                                    t,
                                    required_int(record, "step"),
                                    text(record, "what"),
                                    text(record, "hash"),
                                    maybe_real(record, "norm"),
                                    {}};
      if (auto sketch = record.find("sketch"); sketch != record.end() && sketch->is_array())
        for (size_t i = 0; i < sketch->size(); ++i) fingerprint.sketch.push_back(real(*sketch, i));
      parsed.record = fingerprint;
    } else if (type == "event") {
      EventRecord event{rank, t, text(record, "name"), maybe_int(record, "step"), line_json};
      parsed.record = event;
    } else if (type == "gpu") {
      GpuRecord gpu;
      gpu.rank = rank;
      gpu.t = t;
      gpu.device = static_cast<int>(real(record, "device"));
      gpu.unix_t0 = required_real(record, "unix_t0");
      gpu.unix_t1 = required_real(record, "unix_t1");
      if (!(gpu.unix_t1 > gpu.unix_t0)) throw std::invalid_argument("unix_t1 is not after unix_t0");
      gpu.busy_ms = real(record, "busy_ms");
      gpu.compute_ms = real(record, "compute_ms");
      gpu.nccl_ms = real(record, "nccl_ms");
      gpu.overlap_ms = real(record, "overlap_ms");
      gpu.memcpy_ms = real(record, "memcpy_ms");
      gpu.idle_ms = real(record, "idle_ms");
      gpu.max_gap_ms = real(record, "max_gap_ms");
      gpu.kernels = static_cast<int64_t>(real(record, "kernels"));
      gpu.nccl_kernels = static_cast<int64_t>(real(record, "nccl_kernels"));
      gpu.memcpys = static_cast<int64_t>(real(record, "memcpys"));
      gpu.late = static_cast<int64_t>(real(record, "late"));
      parsed.record = gpu;
    } else {
      parsed.status = ParseStatus::UnknownType;
      return parsed;
    }
    parsed.status = ParseStatus::Ok;
  } catch (const std::exception& error) {
    parsed.status = ParseStatus::Malformed;
    parsed.record.reset();
    parsed.error = error.what();
  }
  return parsed;
}

}  // namespace faultline
