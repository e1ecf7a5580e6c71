// Parsed records of the metrics protocol (docs/metrics-protocol.md), shared by the harness's
// ingest, the stream detectors and the store. Parsing never throws: a malformed line is counted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace faultline {

// Numbers may be non-finite ("nan", "inf", "-inf" on the wire): they parse to NaN/±Inf here.
struct StepRecord {
  int rank = 0;
  double t = 0;
  int64_t step = 0;
  double loss = 0, grad_norm = 0, lr = 0;
  // Whether the trainer wrote grad_norm and lr at all: a log-only trainer may print neither, and
  // a value it never gave is not a non-finite one (NaN in memory, NULL in the store).
  bool has_grad_norm = true, has_lr = true;
  // Timings, tokens and memory: absent when the trainer does not measure them (a log-only
  // script's lines seldom say), which is not 0 ms or 0 bytes (NULL in the store, a blank export
  // cell, no plot line).
  std::optional<double> step_ms, data_ms, comm_ms;
  std::optional<int64_t> tokens, mem_bytes;
  std::optional<int64_t> mem_total_bytes;
  std::optional<double> param_norm, update_ratio;
  std::optional<int64_t> nonfinite;
  std::optional<int64_t> collectives;
  // CPU time of the training thread in the step outside data loading and the collective: the
  // CPU counterpart of step_ms - data_ms - comm_ms. Absent from trainers that do not measure it.
  std::optional<double> cpu_ms;
  // The optimizer update was skipped: a dynamic loss scaler (fp16's GradScaler) found non-finite
  // gradients and lowered its scale. Such a step's non-finite grad_norm is the scaler doing its
  // job, not a fault; a run of them that does not end is (thresholds: nonfinite.max_skipped_steps).
  bool skipped = false;
  std::optional<double> loss_scale;  // the scale the step's loss was multiplied by
};

// Where in the step an anomaly was seen (its `phase`), and which probes saw it (its `probe`):
// the always-on checks, or full per-module probes, which name the module. A record keeps the
// text as written; a trainer's own values are not errors.
enum class AnomalyPhase { Forward, Backward, Optimizer, Loss, Data };
const char* to_string(AnomalyPhase phase);
std::optional<AnomalyPhase> parse_anomaly_phase(std::string_view text);
enum class AnomalyProbe { Cheap, Full };
const char* to_string(AnomalyProbe probe);

struct AnomalyRecord {
  int rank = 0;
  double t = 0;
  int64_t step = 0;
  std::string kind, phase, where, detail;
  std::vector<uint64_t> samples;
  std::vector<std::string> shards;
  std::string json;  // the whole line, for evidence
};

// What a fingerprint digests: the parameters after the step's update, or the step's gradients.
// A record keeps the protocol's `what` as written (unknown values are ignored, not errors).
enum class Fingerprinted { Params, Grads };
const char* to_string(Fingerprinted what);
std::optional<Fingerprinted> parse_fingerprinted(std::string_view text);

struct FingerprintRecord {
  int rank = 0;
  double t = 0;
  int64_t step = 0;
  std::string what, hash;
  bool is(Fingerprinted kind) const { return what == to_string(kind); }
  std::optional<double> norm;  // absent: the trainer writes only the digest
  std::vector<double> sketch;  // empty: no sketch (see docs/metrics-protocol.md)
};

struct EventRecord {
  int rank = 0;
  double t = 0;
  std::string name;
  std::optional<int64_t> step;
  std::string json;  // the whole line: events carry free fields (config, path, status, ...)
};

// What one GPU did in one short interval, from the CUPTI probe (gpu/cupti): unions of kernel and
// memcpy time. Its times are Unix seconds, so it joins a rank's steps through the `unix_time` of
// the rank's start event (docs/metrics-protocol.md, "gpu").
struct GpuRecord {
  int rank = 0;
  double t = 0;
  int device = 0;
  double unix_t0 = 0, unix_t1 = 0;
  double busy_ms = 0, compute_ms = 0, nccl_ms = 0, overlap_ms = 0, memcpy_ms = 0, idle_ms = 0;
  double max_gap_ms = 0;
  int64_t kernels = 0, nccl_kernels = 0, memcpys = 0;
  int64_t late = 0;  // activities the probe dropped: they came after their interval was written
};

using MetricsRecord =
    std::variant<StepRecord, AnomalyRecord, FingerprintRecord, EventRecord, GpuRecord>;

enum class ParseStatus { Ok, Malformed, UnknownType };

struct ParsedLine {
  ParseStatus status = ParseStatus::Malformed;
  std::optional<MetricsRecord> record;
  std::string error;  // for Malformed: what was wrong
};

// Parses one JSONL line. Unknown fields are ignored; an unknown "type" is UnknownType (skipped,
// not an error: newer trainers may add types); anything else wrong is Malformed.
ParsedLine parse_metrics_line(std::string_view line);

}  // namespace faultline
