// Node placeholders of a launcher process, filled by plain replacement of their {name}s.
#include "harness/launch/node_placeholders.hpp"

namespace faultline::harness {

const std::vector<std::string>& node_placeholders() {
  static const std::vector<std::string> names = {"nnodes", "nproc_per_node", "node_rank",
                                                 "master_addr"};
  return names;
}

std::vector<std::string> fill_node_placeholders(std::vector<std::string> argv,
                                                const std::map<std::string, std::string>& values) {
  for (auto& word : argv)
    for (const auto& [name, value] : values) {
      const std::string placeholder = "{" + name + "}";
      for (size_t at = word.find(placeholder); at != std::string::npos;
           at = word.find(placeholder, at + value.size()))
        word.replace(at, placeholder.size(), value);
    }
  return argv;
}

std::vector<std::string> fill_node_of(std::vector<std::string> argv,
                                      const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> values;
  if (auto it = env.find("NODE_RANK"); it != env.end()) values["node_rank"] = it->second;
  if (auto it = env.find("MASTER_ADDR"); it != env.end()) values["master_addr"] = it->second;
  return fill_node_placeholders(std::move(argv), values);
}

std::string node_log(const std::string& out_dir, int node) {
  return out_dir + "/node" + std::to_string(node) + ".log";
}

}  // namespace faultline::harness
