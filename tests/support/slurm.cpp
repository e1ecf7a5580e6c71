// Slurm test support: sinfo and squeue run as real child processes.
#include "support/slurm.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/process.hpp"

namespace faultline::testing {

std::optional<std::string> slurm_unavailable() {
  const char* conf = std::getenv("SLURM_CONF");
  const char* dir = std::getenv("FAULTLINE_SLURM_DIR");
  std::string why;
  if (dir && *dir) {
    std::ifstream failure(std::string(dir) + "/start-failure.txt");
    std::getline(failure, why);
  }
  if (!why.empty()) return "the local Slurm cluster could not start: " + why;
  if (!conf || !*conf)
    return std::string(
        "no Slurm cluster: SLURM_CONF is not set (eval \"$(scripts/slurm-local.sh "
        "start)\" brings one up)");
  auto sinfo = run_process({{"/usr/bin/sinfo", "-h", "-o", "%D"}, {}, 30});
  if (sinfo.exit_code != 0)
    return "no Slurm cluster answers at " + std::string(conf) + ": " + sinfo.output;
  return std::nullopt;
}

int slurm_jobs_mentioning(const std::string& marker) {
  auto squeue = run_process({{"/usr/bin/squeue", "-h", "-o", "%i %o"}, {}, 30});
  std::istringstream lines(squeue.output);
  int count = 0;
  for (std::string line; std::getline(lines, line);)
    count += line.find(marker) != std::string::npos;
  return count;
}

}  // namespace faultline::testing
