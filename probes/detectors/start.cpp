// bad_init: a language model whose first loss is far above ln(vocab size). A freshly initialized
// model predicts close to uniformly, which costs ln(V) nats a token; far more is a miscalibrated
// start (a huge init_std, an unscaled output layer). A warning: such a run may still recover.
#include <cmath>
#include <set>

#include "probes/detectors/detectors.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

class BadInitDetector : public Detector {
 public:
  BadInitDetector(const Thresholds& t, int64_t vocab_size)
      : t_(t.bad_init),
        uniform_(std::log(static_cast<double>(vocab_size))),
        vocab_size_(vocab_size) {}

  void observe(const StepRecord& r) override {
    if (!std::isfinite(r.loss) || !judged_.insert(r.rank).second) return;
    if (!(r.loss > uniform_ + t_.max_excess)) return;
    found_.offer({FailureKind::BadInit, r.step, r.rank,
                  "first loss " + num(r.loss) + " is " + num(r.loss - uniform_) +
                      " nats above ln(vocab_size " + std::to_string(vocab_size_) +
                      ") = " + num(uniform_) + " (limit +" + num(t_.max_excess) + " nats)"});
  }

  void judge(Findings& out, bool) const override { out.merge(found_); }

 private:
  const Thresholds::BadInit t_;
  const double uniform_;  // ln(vocab size): the loss of a uniform prediction
  const int64_t vocab_size_;
  std::set<int> judged_;  // ranks whose first finite loss was seen
  Findings found_;
};

}  // namespace

void add_start_detector(DetectorList& out, const Thresholds& t, const RunContext& context) {
  if (t.bad_init.enabled && context.vocab_size > 1)
    out.push_back(std::make_unique<BadInitDetector>(t, context.vocab_size));
}

}  // namespace faultline::detectors
