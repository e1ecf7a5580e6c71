// Gathers what a report says from the store: a finding (its fields, its search's trials, its
// failing run, replay, baseline and reference) or a single run (its curves and failures).
#pragma once

#include <string>
#include <vector>

#include "report/report_model.hpp"
#include "store/store.hpp"

namespace faultline::report {

struct GatherOptions {
  // A stored reference (`faultline reference add`) whose seed band is drawn under the loss; ""
  // picks the one reference of the subject run's recipe, when there is exactly one.
  std::string reference;
};

// Throws UserError when the finding, the run or the named reference is not stored.
Report gather_finding(const store::Store& store, int64_t finding_id, const GatherOptions& options);
Report gather_run(const store::Store& store, int64_t run_id, const GatherOptions& options);

}  // namespace faultline::report
