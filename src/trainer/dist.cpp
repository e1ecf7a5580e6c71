// Gloo process group set-up. The store's timeout bounds rendezvous; dist.timeout_s bounds each
// collective, so a dead peer turns into an error here rather than a silent hang.
#include "trainer/dist.hpp"

#include <unistd.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef FAULTLINE_TORCH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>

#include "common/error.hpp"

namespace faultline::trainer {

namespace {
int env_int(const char* name, int fallback, int min_value) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < min_value)
    throw UserError(std::string("invalid ") + name + " '" + text + "'", "environment",
                    "expected an integer >= " + std::to_string(min_value));
  return static_cast<int>(value);
}
}  // namespace

RankEnv read_rank_env() {
  RankEnv env;
  env.world_size = env_int("WORLD_SIZE", 1, 1);
  env.rank = env_int("RANK", 0, 0);
  env.local_rank = env_int("LOCAL_RANK", env.rank, 0);
  env.master_port = env_int("MASTER_PORT", 29500, 1);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr && *addr) env.master_addr = addr;
  if (env.rank >= env.world_size)
    throw UserError("RANK " + std::to_string(env.rank) + " is not below WORLD_SIZE " +
                        std::to_string(env.world_size),
                    "environment", "ranks are numbered 0..WORLD_SIZE-1");
  if (const char* host = std::getenv("FAULTLINE_HOST"); host && *host) {
    env.host = host;
  } else {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    env.host = name;
  }
  return env;
}

namespace {
// Which backend a config and device get: "auto" takes NCCL for CUDA tensors where it is built.
bool wants_nccl(const DistConfig& config, const torch::Device& device) {
#ifdef FAULTLINE_TORCH_NCCL
  if (config.backend == DistBackend::Auto) return device.is_cuda();
#endif
  if (config.backend != DistBackend::Nccl) return false;
#ifndef FAULTLINE_TORCH_NCCL
  throw UserError("dist.backend = \"nccl\" but this faultline-train's LibTorch has no NCCL",
                  "dist.backend",
                  "it was built against a LibTorch without c10d ProcessGroupNCCL (a CPU build); "
                  "use \"gloo\" or \"auto\", or build against a CUDA LibTorch (docs/gpu.md)");
#endif
  if (!device.is_cuda())
    throw UserError("dist.backend = \"nccl\" needs train.device on CUDA, not " + device.str(),
                    "dist.backend", "set train.device = \"cuda\" (or \"auto\"), or use \"gloo\"");
  return true;
}
}  // namespace

Communicator::Communicator(const RankEnv& env, const DistConfig& config,
                           const torch::Device& device)
    : env_(env) {
  const bool nccl = wants_nccl(config, device);
  if (env.world_size == 1) return;
  const auto timeout = std::chrono::milliseconds(config.timeout_s * 1000);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(env.master_port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = env.world_size;
  store_options.waitWorkers = true;
  store_options.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
#ifdef FAULTLINE_TORCH_NCCL
  if (nccl) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, options);
    backend_ = "nccl";
    return;
  }
#else
  (void)nccl;
#endif

  auto options = c10d::ProcessGroupGloo::Options::create();
  options->timeout = timeout;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  else
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(env.master_addr));
  group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, options);
  backend_ = "gloo";
}

Communicator::~Communicator() = default;

void Communicator::allreduce_sum(torch::Tensor& tensor) {
  ++collectives_entered_;
  if (!group_) return;
  std::vector<at::Tensor> tensors{tensor};
  group_->allreduce(tensors)->wait();
}

void Communicator::barrier() {
  ++collectives_entered_;
  if (!group_) return;
  group_->barrier()->wait();
}

const char* Communicator::backend_name() const {
  return backend_;
}

}  // namespace faultline::trainer
