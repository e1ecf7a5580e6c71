// Binds the trainer's TOML sections onto TrainConfig and checks the values that depend on each
// other (heads divide the width, fault keys that need their partner, ...).
#include "trainer/train_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "common/config.hpp"
#include "common/enum_names.hpp"
#include "common/hash.hpp"
#include "common/text.hpp"
#include "data/synth.hpp"

namespace faultline::trainer {

namespace {

constexpr std::pair<ScheduleKind, const char*> kScheduleNames[] = {
    {ScheduleKind::Constant, "constant"},
    {ScheduleKind::Cosine, "cosine"},
    {ScheduleKind::Wsd, "wsd"},
};

constexpr std::pair<ReplayRanks, const char*> kReplayRanksNames[] = {
    {ReplayRanks::Own, "own"},
    {ReplayRanks::All, "all"},
};

constexpr std::pair<ProbeLevel, const char*> kProbeNames[] = {
    {ProbeLevel::Off, "off"},
    {ProbeLevel::Cheap, "cheap"},
    {ProbeLevel::Full, "full"},
};

constexpr std::pair<DistBackend, const char*> kBackendNames[] = {
    {DistBackend::Auto, "auto"},
    {DistBackend::Gloo, "gloo"},
    {DistBackend::Nccl, "nccl"},
};

constexpr std::pair<DeviceKind, const char*> kDeviceNames[] = {
    {DeviceKind::Auto, "auto"},
    {DeviceKind::Cpu, "cpu"},
    {DeviceKind::Cuda, "cuda"},
};

constexpr std::pair<Precision, const char*> kPrecisionNames[] = {
    {Precision::Fp32, "fp32"},
    {Precision::Bf16, "bf16"},
};

constexpr std::pair<CpuKernels, const char*> kCpuKernelNames[] = {
    {CpuKernels::Fused, "fused"},
    {CpuKernels::Aten, "aten"},
};

void bind_model(ConfigBinder& b, ModelConfig& m) {
  b.bind("model.vocab_size", m.vocab_size, {2, 65536});
  b.bind("model.block_size", m.block_size, {1, 1 << 16});
  b.bind("model.n_layer", m.n_layer, {1, 1024});
  b.bind("model.n_head", m.n_head, {1, 1024});
  b.bind("model.n_embd", m.n_embd, {1, 1 << 16});
  b.bind("model.tied_head", m.tied_head);
  b.bind("model.init_std", m.init_std, {0.0, {}});
  if (m.n_head > 0 && m.n_embd % m.n_head != 0)
    b.fail("model.n_embd",
           "n_embd " + std::to_string(m.n_embd) + " is not divisible by n_head " +
               std::to_string(m.n_head),
           "choose n_embd as a multiple of model.n_head");
}

void bind_data(ConfigBinder& b, DataConfig& d) {
  b.bind_path("data.path", d.path, PathCheck::MustExist);
  b.bind("data.tokenizer", d.tokenizer);
  b.bind("data.tokenizer_version", d.tokenizer_version, {1, {}});
  b.bind("data.fraction", d.fraction, {0.0, 1.0});
  if (!(d.fraction > 0)) b.fail("data.fraction", "data.fraction must be above 0", "use (0, 1]");
  b.bind("data.synth_seed", d.synth_seed);
  // The generator's own limits (data/synth.hpp), so a recipe is refused before any launch.
  b.bind("data.synth_shards", d.synth_shards, {1, int64_t{data::kMaxSynthShards}});
  b.bind("data.synth_tokens_per_shard", d.synth_tokens_per_shard, {2, int64_t(1) << 32});
  b.bind("data.synth_order", d.synth_order, {1, 8});
  b.bind("data.synth_branching", d.synth_branching, {1, int64_t{data::kMaxSynthBranching}});
}

void bind_optim(ConfigBinder& b, OptimConfig& o) {
  b.bind("optim.lr", o.lr, {0.0, {}});
  b.bind("optim.beta1", o.beta1, {0.0, 1.0});
  b.bind("optim.beta2", o.beta2, {0.0, 1.0});
  b.bind("optim.eps", o.eps, {0.0, {}});
  b.bind("optim.weight_decay", o.weight_decay, {0.0, {}});
  b.bind("optim.grad_clip", o.grad_clip, {0.0, {}});
}

void bind_schedule(ConfigBinder& b, ScheduleConfig& s) {
  b.bind_enum("schedule.kind", s.kind, kScheduleNames);
  b.bind("schedule.warmup_steps", s.warmup_steps, {0, {}});
  b.bind("schedule.min_lr_ratio", s.min_lr_ratio, {0.0, 1.0});
  b.bind("schedule.decay_fraction", s.decay_fraction, {0.0, 1.0});
  b.bind("schedule.total_steps", s.total_steps, {0, {}});
}

void bind_train(ConfigBinder& b, TrainLoopConfig& t) {
  b.bind("train.steps", t.steps, {1, {}});
  b.bind("train.stop_after", t.stop_after, {0, {}});
  b.bind("train.batch_size", t.batch_size, {1, {}});
  b.bind("train.grad_accum", t.grad_accum, {1, {}});
  b.bind("train.seed", t.seed);
  b.bind("train.threads", t.threads, {1, 256});
  b.bind("train.checkpoint_every", t.checkpoint_every, {0, {}});
  b.bind("train.log_every", t.log_every, {0, {}});
  b.bind_enum("train.device", t.device, kDeviceNames);
  b.bind_enum("train.precision", t.precision, kPrecisionNames);
  b.bind_enum("train.cpu_kernels", t.cpu_kernels, kCpuKernelNames);
  if (t.batch_size % t.grad_accum != 0)
    b.fail("train.batch_size",
           "batch_size " + std::to_string(t.batch_size) + " is not divisible by grad_accum " +
               std::to_string(t.grad_accum),
           "make train.batch_size a multiple of train.grad_accum × WORLD_SIZE");
}

void bind_dist(ConfigBinder& b, DistConfig& d) {
  b.bind_enum("dist.backend", d.backend, kBackendNames);
  b.bind("dist.ranks", d.ranks, {1, 4096});
  b.bind("dist.timeout_s", d.timeout_s, {1, {}});
}

void bind_probe(ConfigBinder& b, ProbeConfig& p) {
  b.bind_enum("probe.level", p.level, kProbeNames);
  b.bind("probe.full_from_step", p.full_from_step, {0, {}});
  b.bind("probe.fingerprint_every", p.fingerprint_every, {0, {}});
  b.bind("probe.halt_on_nonfinite", p.halt_on_nonfinite);
  b.bind("probe.checkpoint_on_nonfinite", p.checkpoint_on_nonfinite);
  b.bind("probe.replay_step", p.replay_step, {0, {}});
  std::string samples;
  b.bind("probe.replay_samples", samples);
  for (const auto& item : split(samples, ',')) {
    const std::string text = trim(item);
    if (text.empty()) continue;
    if (!std::all_of(text.begin(), text.end(), ::isdigit) || text.size() > 18) {
      b.fail("probe.replay_samples", "invalid sample index \"" + text + "\"",
             "give global sample indices separated by commas, e.g. \"3,17,42\"");
      continue;
    }
    p.replay_samples.push_back(std::stoull(text));
  }
  b.bind_enum("probe.replay_ranks", p.replay_ranks, kReplayRanksNames);
  if (p.replay_samples.empty() != (p.replay_step == 0))
    b.fail(p.replay_step == 0 ? "probe.replay_samples" : "probe.replay_step",
           "probe.replay_step and probe.replay_samples go together",
           "set both (a step and the samples of its batch to keep) or neither");
}

void bind_fault(ConfigBinder& b, FaultConfig& f, int64_t steps) {
  b.bind("fault.nan_step", f.nan_step, {0, {}});
  b.bind("fault.nan_layer", f.nan_layer);
  b.bind("fault.poison_sample", f.poison_sample, {-1, {}});
  b.bind("fault.lr_spike_step", f.lr_spike_step, {0, {}});
  b.bind("fault.lr_spike_factor", f.lr_spike_factor, {0.0, {}});
  b.bind("fault.crash_rank", f.crash_rank, {-1, {}});
  b.bind("fault.crash_step", f.crash_step, {0, {}});
  b.bind("fault.crash_signal", f.crash_signal);
  b.bind("fault.hang_rank", f.hang_rank, {-1, {}});
  b.bind("fault.hang_step", f.hang_step, {0, {}});
  b.bind("fault.slow_rank", f.slow_rank, {-1, {}});
  b.bind("fault.slow_ms", f.slow_ms, {0, {}});
  b.bind("fault.corrupt_grad_rank", f.corrupt_grad_rank, {-1, {}});
  b.bind("fault.corrupt_grad_step", f.corrupt_grad_step, {0, {}});
  b.bind("fault.corrupt_grad_host", f.corrupt_grad_host);
  b.bind("fault.leak_mb_per_step", f.leak_mb_per_step, {0.0, {}});
  b.bind("fault.data_delay_ms", f.data_delay_ms, {0, {}});
  b.bind("fault.data_delay_rank", f.data_delay_rank, {-1, {}});
  b.bind("fault.nondeterministic", f.nondeterministic);

  auto needs = [&b](bool set, bool partner_set, const std::string& key,
                    const std::string& partner) {
    if (set && !partner_set) b.fail(key, key + " needs " + partner, "set " + partner + " too");
  };
  needs(f.nan_step > 0, !f.nan_layer.empty(), "fault.nan_step", "fault.nan_layer");
  needs(!f.nan_layer.empty(), f.nan_step > 0, "fault.nan_layer", "fault.nan_step");
  needs(f.crash_rank >= 0, f.crash_step > 0, "fault.crash_rank", "fault.crash_step");
  needs(f.hang_rank >= 0, f.hang_step > 0, "fault.hang_rank", "fault.hang_step");
  needs(f.slow_rank >= 0, f.slow_ms > 0, "fault.slow_rank", "fault.slow_ms");
  needs(f.corrupt_grad_rank >= 0, f.corrupt_grad_step > 0, "fault.corrupt_grad_rank",
        "fault.corrupt_grad_step");
  needs(f.crash_step > 0, f.crash_rank >= 0, "fault.crash_step", "fault.crash_rank");
  needs(f.hang_step > 0, f.hang_rank >= 0, "fault.hang_step", "fault.hang_rank");
  needs(f.slow_ms > 0, f.slow_rank >= 0, "fault.slow_ms", "fault.slow_rank");
  needs(!f.corrupt_grad_host.empty(), f.corrupt_grad_step > 0, "fault.corrupt_grad_host",
        "fault.corrupt_grad_step");
  needs(f.corrupt_grad_step > 0, f.corrupt_grad_rank >= 0 || !f.corrupt_grad_host.empty(),
        "fault.corrupt_grad_step", "fault.corrupt_grad_rank (or fault.corrupt_grad_host)");
  // A fault planted after the run's last step never fires: the run passes, and a fault-injection
  // test that expected it to fail is green for nothing.
  for (const auto& [key, step] :
       {std::pair{"fault.nan_step", f.nan_step}, std::pair{"fault.lr_spike_step", f.lr_spike_step},
        std::pair{"fault.crash_step", f.crash_step}, std::pair{"fault.hang_step", f.hang_step},
        std::pair{"fault.corrupt_grad_step", f.corrupt_grad_step}})
    if (step > steps)
      b.fail(key,
             fmt::format("step {} is after the run's last step {} (train.steps): the fault would "
                         "never fire",
                         step, steps),
             fmt::format("give a step from 1 to {}, or train longer", steps));
  const std::string& s = f.crash_signal;
  bool is_code = !s.empty() && s.size() <= 3 && std::all_of(s.begin(), s.end(), ::isdigit) &&
                 std::stoi(s) < 256;
  if (s != "SEGV" && s != "ABRT" && !is_code)
    b.fail("fault.crash_signal", "invalid value \"" + s + "\"",
           "valid: SEGV, ABRT, or an exit code 0-255 such as \"7\"");
}

}  // namespace

// train.device and train.cpu_kernels are left out as the BLAS is: a checkpoint moves between
// devices and kernels, with a warning that the continuation is not bitwise identical.
// grad_accum and dist.ranks only split the global batch of a step (equal up to the order of
// the additions): a checkpoint of an N-rank run resumes on one rank with N-fold accumulation.
const std::vector<std::string>& trajectory_free_keys() {
  static const std::vector<std::string> keys = {"probe.*",
                                                "fault.*",
                                                "train.stop_after",
                                                "train.log_every",
                                                "train.checkpoint_every",
                                                "train.grad_accum",
                                                "train.device",
                                                "train.cpu_kernels",
                                                "dist.ranks",
                                                "dist.timeout_s"};
  return keys;
}

namespace {

std::string trajectory_lines(const std::string& canonical) {
  // A canonical line is "key value": "probe.*" matches its section's lines, a key its own line.
  std::vector<std::string> ignored_prefixes;
  for (const auto& key : trajectory_free_keys())
    ignored_prefixes.push_back(key.back() == '*' ? key.substr(0, key.size() - 1) : key + " ");
  std::string kept;
  for (const auto& line : split(canonical, '\n')) {
    bool ignored = false;
    for (const auto& prefix : ignored_prefixes) ignored = ignored || starts_with(line, prefix);
    if (!ignored && !line.empty()) kept += line + "\n";
  }
  return kept;
}

TrainConfig bind_all(const ConfigSource& source, const std::vector<std::string>& cli_options) {
  TrainConfig config;
  ConfigBinder binder(source);
  binder.suggest_options(cli_options);
  binder.accept_section("launcher");  // the harness's (harness/launch/launcher_config.hpp)
  bind_model(binder, config.model);
  bind_data(binder, config.data);
  // Both checked again where the corpus is made; here a recipe is refused before any launch.
  if (config.data.path.empty() && config.data.tokenizer != data::kSynthTokenizer)
    binder.fail("data.tokenizer",
                "data.path is empty, so the synthetic language is used, but data.tokenizer is '" +
                    config.data.tokenizer + "'",
                std::string("set data.tokenizer = \"") + data::kSynthTokenizer +
                    "\" or point data.path at shards");
  if (config.data.synth_branching > config.model.vocab_size)
    binder.fail("data.synth_branching",
                fmt::format("data.synth_branching {} is more than model.vocab_size {}: a "
                            "context cannot have more candidates than there are tokens",
                            config.data.synth_branching, config.model.vocab_size),
                fmt::format("expected 1..min({}, model.vocab_size)", data::kMaxSynthBranching));
  bind_optim(binder, config.optim);
  bind_schedule(binder, config.schedule);
  bind_train(binder, config.train);
  bind_dist(binder, config.dist);
  bind_probe(binder, config.probe);
  bind_fault(binder, config.fault, config.train.steps);
  binder.finish();
  config.source = source.name();
  config.canonical = binder.canonical();
  config.hash = hex64(hash_text(config.canonical));
  config.trajectory_hash = hex64(hash_text(trajectory_lines(config.canonical)));
  for (const auto& [key, value] : source.values()) config.origins[key] = value.origin;
  return config;
}

}  // namespace

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                              const std::vector<std::string>& cli_options) {
  ConfigSource source = ConfigSource::from_file(path);
  source.apply_overrides(overrides);
  return bind_all(source, cli_options);
}

TrainConfig parse_train_config(const std::string& toml_text, const std::string& name,
                               const std::vector<std::string>& overrides) {
  ConfigSource source = ConfigSource::from_string(toml_text, name);
  source.apply_overrides(overrides);
  return bind_all(source, {});
}

std::vector<std::string> absolute_path_overrides(const std::vector<std::string>& overrides) {
  static const std::vector<std::string> path_keys = {"data.path"};  // those bound with bind_path
  std::vector<std::string> out;
  for (const auto& assignment : overrides) {
    const auto equals = assignment.find('=');
    const std::string key = equals == std::string::npos ? "" : trim(assignment.substr(0, equals));
    if (std::find(path_keys.begin(), path_keys.end(), key) == path_keys.end()) {
      out.push_back(assignment);
      continue;
    }
    const auto value = ConfigValue::parse_literal(assignment.substr(equals + 1), "--set " + key);
    const std::string text = value.type == ConfigValue::Type::String ? value.string : value.toml();
    std::filesystem::path path = text;
    out.push_back(text.empty() || path.is_absolute()
                      ? assignment
                      : key + "=" +
                            (std::filesystem::current_path() / path).lexically_normal().string());
  }
  return out;
}

std::string TrainConfig::where(const std::string& key) const {
  auto it = origins.find(key);
  return it == origins.end() ? key : key + " at " + it->second;
}

const char* to_string(ScheduleKind kind) {
  return name_of(kScheduleNames, kind);
}
const char* to_string(ProbeLevel level) {
  return name_of(kProbeNames, level);
}
const char* to_string(DistBackend backend) {
  return name_of(kBackendNames, backend);
}
const char* to_string(DeviceKind device) {
  return name_of(kDeviceNames, device);
}
const char* to_string(Precision precision) {
  return name_of(kPrecisionNames, precision);
}
const char* to_string(CpuKernels kernels) {
  return name_of(kCpuKernelNames, kernels);
}

}  // namespace faultline::trainer
