// What a trial does with each record its ranks write: feed the detectors, batch the rows into
// the store (one transaction per poll), count malformed lines, and tell a progress observer.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "harness/launch/supervisor.hpp"
#include "harness/trial/trial.hpp"
#include "probes/detectors/run_judge.hpp"
#include "store/store.hpp"

namespace faultline::harness {

// Buffers records for batch inserts and feeds the judge as they arrive.
class IngestSink : public RecordSink {
 public:
  IngestSink(store::Store& store, int64_t run_id, detectors::RunJudge& judge,
             TrialObserver* observer)
      : store_(store), run_id_(run_id), judge_(judge), observer_(observer) {}

  void on_record(int, const MetricsRecord& record) override {
    judge_.observe(record);
    if (const auto* step = std::get_if<StepRecord>(&record); step && observer_)
      observer_->step(*step);
    std::visit([this](const auto& r) { add(r); }, record);
    if (++buffered_ >= 10000) flush();
  }
  void on_malformed(int rank, const std::string& line, const std::string& error) override {
    MalformedLines& counted = malformed_[rank];
    if (counted.lines++ == 0) {
      counted.rank = rank;
      counted.first_line = printable(line.substr(0, 200));
      counted.first_error = printable(error);
    }
  }
  std::vector<MalformedLines> malformed() const {
    std::vector<MalformedLines> ranks;
    for (const auto& [rank, counted] : malformed_) ranks.push_back(counted);
    return ranks;
  }
  bool should_stop() override {
    flush();
    return judge_.fatal();
  }
  void flush() {
    if (buffered_ == 0) return;
    store_.in_transaction([this] {  // one commit per poll: batches are what keeps ingest fast
      if (!steps_.empty()) store_.add_steps(run_id_, steps_);
      if (!anomalies_.empty()) store_.add_anomalies(run_id_, anomalies_);
      if (!events_.empty()) store_.add_events(run_id_, events_);
      if (!fingerprints_.empty()) store_.add_fingerprints(run_id_, fingerprints_);
      if (!gpu_.empty()) store_.add_gpu_records(run_id_, gpu_);
    });
    steps_.clear();
    anomalies_.clear();
    events_.clear();
    fingerprints_.clear();
    gpu_.clear();
    buffered_ = 0;
  }

 private:
  void add(const StepRecord& r) { steps_.push_back(r); }
  void add(const AnomalyRecord& r) { anomalies_.push_back(r); }
  void add(const EventRecord& r) { events_.push_back(r); }
  void add(const FingerprintRecord& r) { fingerprints_.push_back(r); }
  void add(const GpuRecord& r) { gpu_.push_back(r); }

  // A malformed line may be any bytes; what is kept must be valid text (JSON, the terminal).
  static std::string printable(std::string text) {
    for (char& c : text)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
    return text;
  }

  store::Store& store_;
  int64_t run_id_;
  detectors::RunJudge& judge_;
  TrialObserver* observer_;
  std::map<int, MalformedLines> malformed_;
  std::vector<StepRecord> steps_;
  std::vector<AnomalyRecord> anomalies_;
  std::vector<EventRecord> events_;
  std::vector<FingerprintRecord> fingerprints_;
  std::vector<GpuRecord> gpu_;
  int buffered_ = 0;
};

}  // namespace faultline::harness
