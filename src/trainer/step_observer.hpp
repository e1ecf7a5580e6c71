// The forward observer of one step: planted faults first (they change outputs), then the
// per-layer finiteness check when full probes are on.
#pragma once

#include "probes/inprocess/finite_checks.hpp"
#include "trainer/faults.hpp"
#include "trainer/model.hpp"

namespace faultline::trainer {

class StepObserver : public ForwardObserver {
 public:
  StepObserver(const FaultPlan& faults, probes::ForwardFiniteCheck* check)
      : faults_(faults), check_(check) {}

  torch::Tensor on_output(const std::string& module, torch::Tensor output) override {
    output = faults_.on_output(module, std::move(output));
    if (check_) check_->check(module, output);
    return output;
  }

 private:
  const FaultPlan& faults_;
  probes::ForwardFiniteCheck* check_;
};

}  // namespace faultline::trainer
