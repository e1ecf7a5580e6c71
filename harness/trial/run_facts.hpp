// What a stored run's start events say: its sample count, each rank's host, and the facts that
// decide its bits (CPU, BLAS and its kernel, threads, LibTorch). Read by isolate, its phases and
// repro.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace faultline::store {
class Store;
struct RunInfo;
}  // namespace faultline::store

namespace faultline::harness {

// The start event's fields, or an empty object when the run has none.
nlohmann::json start_event(store::Store& store, int64_t run_id);

// The samples in use (after data.fraction) per the start event; an InfraError when absent.
uint64_t samples_used(store::Store& store, int64_t run_id);
// The global samples of `step`'s batch from rank 0's `batch` event (command trainers with
// faultline_probe.py write one at full-probe, replay and fingerprint-every-step steps); empty when
// there is none.
std::vector<uint64_t> batch_event(store::Store& store, int64_t run_id, int64_t step);

// The host each rank of the run reported in its start event, by rank ("" where none did).
std::vector<std::string> rank_hosts(store::Store& store, int64_t run_id);

// A stored run's resolved config written back as a recipe, <work_dir>/recipes/<name>.toml, its
// first line the comment `why`, then one naming the run's own recipe: a trial of that recipe runs
// exactly what the run ran. Its path.
std::string write_run_config(const store::RunInfo& run, const std::string& work_dir,
                             const std::string& name, const std::string& why);

// What the trainer said stays nondeterministic (the start event's "nondeterministic" list: on
// CUDA, a kernel without a deterministic version; the helper's determinism="warn"); empty when it
// said nothing.
std::vector<std::string> said_nondeterministic(const nlohmann::json& start);

// Whether the trainer said its model runs under torch.compile (the helper's "compiled"): its
// full-probe steps then run eagerly, with eager's numerics.
bool said_compiled(const nlohmann::json& start);

// The keys of a start event that decide the bits of a run, in a fixed order.
const std::vector<const char*>& bit_deciding_facts();

// Those facts of a start event (the keys it has).
nlohmann::json host_facts(const nlohmann::json& start);

}  // namespace faultline::harness
