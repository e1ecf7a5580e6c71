// CPU time of the calling thread: what a step really computed, as opposed to the wall time a
// descheduled or waiting thread also accrues (the step record's cpu_ms; fault.slow_ms's burn).
#pragma once

#include <time.h>

namespace faultline::trainer {

inline double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

}  // namespace faultline::trainer
