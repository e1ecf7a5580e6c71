// Tests for src/trainer/checkpoint.cpp: round trip of the training state and every refusal.
#include "trainer/checkpoint.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "../core/test_support.hpp"
#include "trainer/model.hpp"

namespace faultline::trainer {
namespace {

using faultline::testing::read_file;
using faultline::testing::ScratchDir;
using faultline::testing::user_error;
using faultline::testing::write_file;

ModelConfig tiny(int64_t layers = 1, int64_t width = 16) {
  ModelConfig config;
  config.vocab_size = 32;
  config.block_size = 8;
  config.n_layer = layers;
  config.n_head = 2;
  config.n_embd = width;
  return config;
}

// A model with its flat buffers and optimizer, after a few AdamW steps on random grads.
struct Rig {
  explicit Rig(const ModelConfig& config, int steps = 3, const torch::Device& device = torch::kCPU)
      : model(config) {
    model->initialize(0.02);
    params = std::make_unique<FlatParams>(*model, device);
    optimizer = std::make_unique<FlatAdamW>(*params, FlatAdamW::Options{});
    for (int i = 0; i < steps; ++i) {
      params->grads().copy_(torch::randn({params->numel()}));
      optimizer->step(1e-2);
    }
  }
  TrainingState state() { return {*params, *optimizer}; }

  Gpt model;
  std::unique_ptr<FlatParams> params;
  std::unique_ptr<FlatAdamW> optimizer;
};

CheckpointMeta sample_meta() {
  CheckpointMeta meta;
  meta.step = 3;
  meta.config_hash = "0123456789abcdef";
  meta.trajectory_hash = "fedcba9876543210";
  meta.blas = "openblas (Haswell)";
  meta.blas_kernel_source = "auto";
  meta.threads = 2;
  meta.world_size = 4;
  meta.sampler_seed = 1234;
  meta.sampler_epoch = 7;
  meta.torch_version = "2.x";
  return meta;
}

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(21);
    source = std::make_unique<Rig>(tiny());
    path = dir.file("step-3.ckpt");
    save_checkpoint(path, sample_meta(), source->state());
  }

  ScratchDir dir;
  std::unique_ptr<Rig> source;
  std::string path;
};

TEST_F(Checkpoint, RoundTripsParamsMomentsStepAndMeta) {
  torch::manual_seed(99);  // a different init and a different optimizer history
  Rig target(tiny(), 1);
  ASSERT_FALSE(torch::equal(target.params->values(), source->params->values()));
  CheckpointMeta meta = load_checkpoint(path, target.state());
  EXPECT_TRUE(torch::equal(target.params->values(), source->params->values()));
  EXPECT_TRUE(torch::equal(target.optimizer->exp_avg(), source->optimizer->exp_avg()));
  EXPECT_TRUE(torch::equal(target.optimizer->exp_avg_sq(), source->optimizer->exp_avg_sq()));
  EXPECT_EQ(target.optimizer->step_count(), 3);
  // The model's own parameters see the loaded values: they are views into the flat buffer.
  EXPECT_TRUE(torch::equal(target.model->wte->weight, source->model->wte->weight));
  const CheckpointMeta expected = sample_meta();
  EXPECT_EQ(meta.step, expected.step);
  EXPECT_EQ(meta.config_hash, expected.config_hash);
  EXPECT_EQ(meta.trajectory_hash, expected.trajectory_hash);
  EXPECT_EQ(meta.blas, expected.blas);
  EXPECT_EQ(meta.blas_kernel_source, expected.blas_kernel_source);
  EXPECT_EQ(meta.threads, expected.threads);
  EXPECT_EQ(meta.world_size, expected.world_size);
  EXPECT_EQ(meta.sampler_seed, expected.sampler_seed);
  EXPECT_EQ(meta.sampler_epoch, expected.sampler_epoch);
  EXPECT_EQ(meta.torch_version, expected.torch_version);
}

TEST_F(Checkpoint, RestoresTheDefaultCpuGenerator) {
  auto uniform = torch::rand({8});
  auto normal = torch::randn({8});
  auto more = torch::rand({100});  // move the generator on
  load_checkpoint(path, source->state());
  EXPECT_TRUE(torch::equal(torch::rand({8}), uniform));
  EXPECT_TRUE(torch::equal(torch::randn({8}), normal));
  EXPECT_TRUE(torch::equal(torch::rand({100}), more));  // and the whole sequence after
}

TEST_F(Checkpoint, ResumedTrainingContinuesBitwise) {
  auto grads = torch::randn({source->params->numel()});
  Rig resumed(tiny(), 0);
  load_checkpoint(path, resumed.state());
  source->params->grads().copy_(grads);
  resumed.params->grads().copy_(grads);
  source->optimizer->step(1e-2);
  resumed.optimizer->step(1e-2);
  EXPECT_TRUE(torch::equal(resumed.params->values(), source->params->values()));
}

// Device tests: skipped without a CUDA device (and with Debian's CPU LibTorch).
TEST_F(Checkpoint, MovesBetweenCudaAndCpuUnchanged) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no usable CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  Rig on_cuda(tiny(), 0, cuda);
  load_checkpoint(path, on_cuda.state());
  EXPECT_TRUE(on_cuda.params->values().is_cuda());
  EXPECT_TRUE(torch::equal(on_cuda.params->values().cpu(), source->params->values()));
  EXPECT_TRUE(torch::equal(on_cuda.optimizer->exp_avg_sq().cpu(), source->optimizer->exp_avg_sq()));
  const std::string again = dir.file("from-cuda.ckpt");
  save_checkpoint(again, sample_meta(), on_cuda.state());
  Rig on_cpu(tiny(), 0);
  load_checkpoint(again, on_cpu.state());
  EXPECT_TRUE(torch::equal(on_cpu.params->values(), source->params->values()));
  EXPECT_TRUE(torch::equal(on_cpu.optimizer->exp_avg(), source->optimizer->exp_avg()));
}

TEST_F(Checkpoint, WritesAtomicallyWithoutLeavingATemporary) {
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(read_file(path).substr(0, 8), std::string("FLCKPT\0\0", 8));
}

TEST_F(Checkpoint, RefusesAMissingFile) {
  ErrorItem error = user_error([&] { load_checkpoint(dir.file("absent.ckpt"), source->state()); });
  EXPECT_EQ(error.what, "cannot read checkpoint");
  EXPECT_EQ(error.where, dir.file("absent.ckpt"));
}

TEST_F(Checkpoint, RefusesWrongMagic) {
  std::string bytes = read_file(path);
  bytes[0] = 'X';
  write_file(path, bytes);
  ErrorItem error = user_error([&] { load_checkpoint(path, source->state()); });
  EXPECT_EQ(error.what, "not a faultline checkpoint");
  EXPECT_EQ(error.where, path);
}

TEST_F(Checkpoint, RefusesAnotherFormatVersion) {
  std::string bytes = read_file(path);
  const uint32_t version = kCheckpointFormatVersion + 1;
  std::memcpy(bytes.data() + 8, &version, sizeof version);
  write_file(path, bytes);
  ErrorItem error = user_error([&] { load_checkpoint(path, source->state()); });
  EXPECT_EQ(error.what, "unsupported checkpoint format version " + std::to_string(version));
  EXPECT_EQ(error.where, path);
  EXPECT_NE(error.hint.find(std::to_string(kCheckpointFormatVersion)), std::string::npos);
}

TEST_F(Checkpoint, RefusesAChecksumMismatch) {
  std::string bytes = read_file(path);
  bytes[bytes.size() / 2] ^= 0x01;  // one bit in the payload
  write_file(path, bytes);
  auto before = source->params->values().clone();
  ErrorItem error = user_error([&] { load_checkpoint(path, source->state()); });
  EXPECT_NE(error.what.find("checkpoint checksum mismatch"), std::string::npos) << error.what;
  EXPECT_EQ(error.where, path);
  EXPECT_TRUE(torch::equal(source->params->values(), before));  // nothing was restored
}

TEST_F(Checkpoint, RefusesATruncatedFile) {
  const std::string bytes = read_file(path);
  for (size_t size : {bytes.size() - 1, bytes.size() / 2, size_t(30), size_t(10), size_t(0)}) {
    SCOPED_TRACE(size);
    write_file(path, bytes.substr(0, size));
    ErrorItem error = user_error([&] { load_checkpoint(path, source->state()); });
    EXPECT_EQ(error.where, path);
    EXPECT_FALSE(error.what.empty());
  }
}

TEST_F(Checkpoint, RefusesADifferentParameterCount) {
  Rig deeper(tiny(2), 0);
  ErrorItem error = user_error([&] { load_checkpoint(path, deeper.state()); });
  EXPECT_EQ(error.what, "checkpoint has " + std::to_string(source->params->layout().size()) +
                            " parameters, the model has " +
                            std::to_string(deeper.params->layout().size()));
  EXPECT_EQ(error.where, path);
}

TEST_F(Checkpoint, RefusesADifferentParameterSize) {
  Rig wider(tiny(1, 32), 0);
  auto before = wider.params->values().clone();
  ErrorItem error = user_error([&] { load_checkpoint(path, wider.state()); });
  const auto& first = wider.params->layout()[0];
  EXPECT_EQ(error.what, "parameter 0 (" + first.name + ") has " +
                            std::to_string(source->params->layout()[0].numel) +
                            " elements in the checkpoint, " + std::to_string(first.numel) +
                            " in the model");
  EXPECT_EQ(error.where, path);
  EXPECT_TRUE(torch::equal(wider.params->values(), before));
}

TEST(CheckpointPath, IsZeroPaddedInsideTheDirectory) {
  EXPECT_EQ(checkpoint_path("/runs/a", 12), "/runs/a/step-00000012.ckpt");
  EXPECT_EQ(checkpoint_path("ckpt", 123456789), "ckpt/step-123456789.ckpt");
}

}  // namespace
}  // namespace faultline::trainer
