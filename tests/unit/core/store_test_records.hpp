// Test support for the store tests: a fully populated step record with recognisable values.
#pragma once

#include "common/metrics_record.hpp"

namespace faultline::testing {

inline StepRecord step_record(int rank, int64_t step, double loss) {
  StepRecord r;
  r.rank = rank;
  r.step = step;
  r.t = 0.5 * static_cast<double>(step);
  r.loss = loss;
  r.grad_norm = 1.25;
  r.lr = 3e-4;
  r.step_ms = 100;
  r.data_ms = 5;
  r.comm_ms = 2;
  r.tokens = 1000;
  r.mem_bytes = 1 << 20;
  return r;
}

}  // namespace faultline::testing
