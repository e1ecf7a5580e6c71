// Checkpoint file: "FLCKPT\0\0", u32 version, u64 header length, JSON header, the raw float32
// blobs (values, exp_avg, exp_avg_sq), the generator state, and a trailing XXH64 of all before it.
#include "trainer/checkpoint.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/hash.hpp"

namespace faultline::trainer {

namespace {

constexpr char kMagic[8] = {'F', 'L', 'C', 'K', 'P', 'T', 0, 0};

nlohmann::json layout_json(const FlatParams& params) {
  nlohmann::json layout = nlohmann::json::array();
  for (const auto& entry : params.layout()) layout.push_back({entry.name, entry.numel});
  return layout;
}

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void raw(const void* data, size_t size) { out_.append(static_cast<const char*>(data), size); }
  template <typename T>
  void value(T v) {
    raw(&v, sizeof v);
  }
  // Checkpoints hold host bytes whatever device trained: they load onto any device.
  void tensor(const torch::Tensor& t) {
    const auto host = t.to(torch::kCPU).contiguous();
    raw(host.data_ptr(), host.numel() * host.element_size());
  }

 private:
  std::string& out_;
};

class Reader {
 public:
  Reader(const std::string& data, const std::string& path) : data_(data), path_(path) {}
  const char* take(size_t size) {
    if (pos_ + size > data_.size())
      throw UserError("checkpoint is truncated", path_,
                      "it was not fully written; use an earlier one");
    const char* p = data_.data() + pos_;
    pos_ += size;
    return p;
  }
  template <typename T>
  T value() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  void tensor(torch::Tensor& t) {
    auto host = t.is_cpu() ? t : torch::empty(t.sizes(), t.options().device(torch::kCPU));
    std::memcpy(host.data_ptr(), take(t.numel() * 4), t.numel() * 4);
    if (!t.is_cpu()) t.copy_(host);
  }

 private:
  const std::string& data_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "/step-%08lld.ckpt", static_cast<long long>(step));
  return dir + name;
}

void save_checkpoint(const std::string& path, const CheckpointMeta& meta, TrainingState state) {
  auto generator_state = at::detail::getDefaultCPUGenerator().get_state();
  nlohmann::json header = {
      {"step", meta.step},
      {"config_hash", meta.config_hash},
      {"trajectory_hash", meta.trajectory_hash},
      {"blas", meta.blas},
      {"blas_kernel_source", meta.blas_kernel_source},
      {"threads", meta.threads},
      {"world_size", meta.world_size},
      {"sampler",
       {{"seed", meta.sampler_seed}, {"epoch", meta.sampler_epoch}, {"next_step", meta.step + 1}}},
      {"adam_step", state.optimizer.step_count()},
      {"numel", state.params.numel()},
      {"generator_bytes", generator_state.numel()},
      {"torch_version", meta.torch_version},
      {"layout", layout_json(state.params)},
  };
  std::string text = header.dump();
  std::string out;
  Writer writer(out);
  writer.raw(kMagic, sizeof kMagic);
  writer.value<uint32_t>(kCheckpointFormatVersion);
  writer.value<uint64_t>(text.size());
  writer.raw(text.data(), text.size());
  writer.tensor(state.params.values());
  writer.tensor(state.optimizer.exp_avg());
  writer.tensor(state.optimizer.exp_avg_sq());
  writer.tensor(generator_state.contiguous());
  writer.value<uint64_t>(hash_bytes(out.data(), out.size()));

  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(out.data(), static_cast<std::streamsize>(out.size()));
    if (!file)
      throw UserError("cannot write checkpoint", temporary, "check disk space and permissions");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw UserError("cannot move checkpoint into place", path, "check permissions");
}

CheckpointMeta load_checkpoint(const std::string& path, TrainingState state) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UserError("cannot read checkpoint", path, "check the path given with --resume");
  std::string data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (data.size() < sizeof kMagic + 4 + 8 + 8 ||
      std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    throw UserError("not a faultline checkpoint", path,
                    "expected a .ckpt written by faultline-train");
  uint64_t stored_sum;
  std::memcpy(&stored_sum, data.data() + data.size() - 8, 8);
  uint64_t actual_sum = hash_bytes(data.data(), data.size() - 8);
  Reader reader(data, path);
  reader.take(sizeof kMagic);
  auto version = reader.value<uint32_t>();
  if (version != kCheckpointFormatVersion)
    throw UserError(
        "unsupported checkpoint format version " + std::to_string(version), path,
        "this faultline-train reads version " + std::to_string(kCheckpointFormatVersion));
  if (stored_sum != actual_sum)
    throw UserError("checkpoint checksum mismatch (stored " + hex64(stored_sum) + ", computed " +
                        hex64(actual_sum) + ")",
                    path, "the file is corrupt; use an earlier checkpoint");
  auto header_size = reader.value<uint64_t>();
  nlohmann::json header = nlohmann::json::parse(std::string(reader.take(header_size), header_size));

  const auto stored_layout = header.at("layout");
  const auto expected_layout = layout_json(state.params);
  if (stored_layout.size() != expected_layout.size())
    throw UserError("checkpoint has " + std::to_string(stored_layout.size()) +
                        " parameters, the model has " + std::to_string(expected_layout.size()),
                    path, "resume with the model config the checkpoint was written with");
  for (size_t i = 0; i < stored_layout.size(); ++i)
    if (stored_layout[i][1] != expected_layout[i][1])
      throw UserError("parameter " + std::to_string(i) + " (" +
                          expected_layout[i][0].get<std::string>() + ") has " +
                          stored_layout[i][1].dump() + " elements in the checkpoint, " +
                          expected_layout[i][1].dump() + " in the model",
                      path, "resume with the model config the checkpoint was written with");

  reader.tensor(state.params.values());
  reader.tensor(state.optimizer.exp_avg());
  reader.tensor(state.optimizer.exp_avg_sq());
  auto generator_state = torch::empty({header.at("generator_bytes").get<int64_t>()}, torch::kUInt8);
  std::memcpy(generator_state.data_ptr(), reader.take(generator_state.numel()),
              generator_state.numel());
  {
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(generator_state);
  }
  state.optimizer.set_step_count(header.at("adam_step").get<int64_t>());

  CheckpointMeta meta;
  meta.step = header.at("step").get<int64_t>();
  meta.config_hash = header.at("config_hash").get<std::string>();
  meta.trajectory_hash = header.at("trajectory_hash").get<std::string>();
  meta.blas = header.at("blas").get<std::string>();
  meta.blas_kernel_source = header.value("blas_kernel_source", "");
  meta.threads = header.at("threads").get<int64_t>();
  meta.world_size = header.at("world_size").get<int>();
  meta.sampler_seed = header.at("sampler").at("seed").get<uint64_t>();
  meta.sampler_epoch = header.at("sampler").at("epoch").get<uint64_t>();
  meta.torch_version = header.at("torch_version").get<std::string>();
  return meta;
}

}  // namespace faultline::trainer
