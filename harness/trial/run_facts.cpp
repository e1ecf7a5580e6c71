// Reads a run's start event back from the store, and writes its config back as a recipe.
#include "harness/trial/run_facts.hpp"

#include <filesystem>
#include <fstream>

#include "common/event_names.hpp"
#include "harness/launch/launcher.hpp"
#include "store/store.hpp"

namespace faultline::harness {

nlohmann::json start_event(store::Store& store, int64_t run_id) {
  for (const auto& event : store.events(run_id, {kStartEvent})) {
    if (event.rank != 0) continue;
    auto start = nlohmann::json::parse(event.json, nullptr, false);
    return start.is_discarded() ? nlohmann::json::object() : start;
  }
  return nlohmann::json::object();
}

std::string write_run_config(const store::RunInfo& run, const std::string& work_dir,
                             const std::string& name, const std::string& why) {
  const auto dir = std::filesystem::path(work_dir) / "recipes";
  std::filesystem::create_directories(dir);
  const auto path = dir / (name + ".toml");
  // Messages about the trial's recipe name this copy: the line says which file to edit.
  std::ofstream out(path);
  out << "# " << why << "\n";
  if (!run.config_path.empty())
    out << "# (a copy: the run's recipe is " << run.config_path << ")\n";
  out << run.config;
  return path.string();
}

uint64_t samples_used(store::Store& store, int64_t run_id) {
  const auto start = start_event(store, run_id);
  if (!start.contains("samples"))
    throw InfraError("run " + std::to_string(run_id) + " has no start event with its sample count");
  return start.at("samples").get<uint64_t>();
}

std::vector<uint64_t> batch_event(store::Store& store, int64_t run_id, int64_t step) {
  for (const auto& event : store.events(run_id, {kBatchEvent})) {
    if (event.step != step || event.rank != 0) continue;
    const auto fields = nlohmann::json::parse(event.json, nullptr, false);
    if (!fields.is_discarded() && fields.contains("samples") && fields["samples"].is_array())
      return fields["samples"].get<std::vector<uint64_t>>();
  }
  return {};
}

std::vector<std::string> rank_hosts(store::Store& store, int64_t run_id) {
  std::vector<std::string> hosts;
  for (const auto& event : store.events(run_id, {kStartEvent})) {
    if (event.rank < 0) continue;
    auto start = nlohmann::json::parse(event.json, nullptr, false);
    if (start.is_discarded() || !start.contains("host")) continue;
    if (hosts.size() <= static_cast<size_t>(event.rank)) hosts.resize(event.rank + 1);
    hosts[event.rank] = start.at("host").get<std::string>();
  }
  return hosts;
}

std::vector<std::string> said_nondeterministic(const nlohmann::json& start) {
  std::vector<std::string> said;
  if (!start.contains("nondeterministic") || !start.at("nondeterministic").is_array()) return said;
  for (const auto& item : start.at("nondeterministic"))
    if (item.is_string() && !item.get<std::string>().empty())
      said.push_back(item.get<std::string>());
  return said;
}

bool said_compiled(const nlohmann::json& start) {
  return start.contains("compiled") && start.at("compiled").is_boolean() &&
         start.at("compiled").get<bool>();
}

const std::vector<const char*>& bit_deciding_facts() {
  // "gemm": faultline-train's fused CPU kernels call oneDNN, whose code depends on the CPU's ISA.
  static const std::vector<const char*> keys = {"cpu",           "blas",    "blas_kernel",
                                                "gemm",          "threads", "blas_threads",
                                                "torch_version", "backend", "world_size"};
  return keys;
}

nlohmann::json host_facts(const nlohmann::json& start) {
  nlohmann::json facts = nlohmann::json::object();
  for (const char* key : bit_deciding_facts())
    if (start.contains(key)) facts[key] = start.at(key);
  if (start.contains("host")) facts["host"] = start.at("host");
  return facts;
}

}  // namespace faultline::harness
