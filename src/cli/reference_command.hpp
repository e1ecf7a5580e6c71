// `faultline reference add|list|show`: named references of healthy runs (seeds of one config)
// that `smoke --reference` judges loss curves against.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/metrics_record.hpp"
#include "store/store.hpp"

namespace CLI {
class App;
}

namespace faultline::cli {

void add_reference_commands(CLI::App& app, int& exit_code);

// The step records of every run of reference NAME, in its order. An unknown name is a
// UserError naming it and the stored references.
std::shared_ptr<const std::vector<std::vector<StepRecord>>> load_reference(
    const store::Store& store, const std::string& name);

}  // namespace faultline::cli
