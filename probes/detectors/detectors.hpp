// Factories for the stream detector families; RunJudge owns what they make.
#pragma once

#include <memory>
#include <vector>

#include "probes/detectors/detector.hpp"
#include "probes/detectors/thresholds.hpp"

namespace faultline::detectors {

using DetectorList = std::vector<std::unique_ptr<Detector>>;

// Training dynamics (dynamics.cpp): nonfinite, data and other anomaly records, grad_explode,
// grad_vanish, loss_spike, stalled.
void add_dynamics_detectors(DetectorList& out, const Thresholds& thresholds,
                            const RunContext& context);

// fp16's dynamic loss scaler (loss_scaler.cpp): nonfinite when it never finds a scale that works.
void add_loss_scaler_detector(DetectorList& out, const Thresholds& thresholds);

// The run's start (start.cpp): bad_init, when the context knows the vocabulary size.
void add_start_detector(DetectorList& out, const Thresholds& thresholds, const RunContext& context);

// The learning rate (lr.cpp): lr_anomaly.
void add_lr_detector(DetectorList& out, const Thresholds& thresholds, const RunContext& context);

// Resources (resources.cpp): memory, data_stall.
void add_resource_detectors(DetectorList& out, const Thresholds& thresholds);

// A rank slower than its peers step after step (straggler.cpp): straggler.
void add_straggler_detector(DetectorList& out, const Thresholds& thresholds);

// The GPU's time per step from the CUPTI probe's gpu records (gpu.cpp): data_stall evidence (GPU
// idle while data loads) and slow_comm (a rank's NCCL time far above its peers').
void add_gpu_detector(DetectorList& out, const Thresholds& thresholds);

}  // namespace faultline::detectors
