// The owner file of a run directory (run_owner.hpp), as a versioned JSON document.
#include "harness/trial/run_owner.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace faultline::harness {

namespace fs = std::filesystem;

namespace {

constexpr int kVersion = 1;

std::string absolute_normal(const std::string& path) {
  std::error_code error;
  const auto canonical = fs::weakly_canonical(fs::absolute(path, error), error);
  return (error ? fs::path(path).lexically_normal() : canonical).string();
}

}  // namespace

void to_json(nlohmann::json& json, const RunOwner& owner) {
  json = {{"version", kVersion}, {"store", owner.store}, {"run_id", owner.run_id}};
}

void write_run_owner(const std::string& dir, const RunOwner& owner) {
  RunOwner absolute = owner;
  absolute.store = absolute_normal(owner.store);
  std::ofstream(fs::path(dir) / kRunOwnerFile) << nlohmann::json(absolute).dump() << "\n";
}

std::optional<RunOwner> read_run_owner(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kRunOwnerFile);
  if (!in) return std::nullopt;
  const auto json = nlohmann::json::parse(in, nullptr, false);
  // A later version may mean something else by its fields: not read, as if absent.
  if (!json.is_object() || json.value("version", 0) != kVersion ||
      !json.value("store", nlohmann::json()).is_string() ||
      !json.value("run_id", nlohmann::json()).is_number_integer())
    return std::nullopt;
  return RunOwner{json["store"].get<std::string>(), json["run_id"].get<int64_t>()};
}

std::optional<RunOwner> held_by_another_run(const std::string& dir, const std::string& store_path,
                                            int64_t run_id) {
  auto owner = read_run_owner(dir);
  if (owner && (owner->run_id != run_id || owner->store != absolute_normal(store_path)))
    return owner;
  return std::nullopt;
}

}  // namespace faultline::harness
