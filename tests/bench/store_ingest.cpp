// Benchmark of the store's metrics ingest: step records into a fresh file-backed store in the
// batch sizes the harness uses. Built, never run by ctest. Usage:
//   store_ingest [--ranks 8] [--steps 125000] [--batches 1000,10000] [--dir /tmp]
//                [--sync NORMAL|FULL|OFF] [--page BYTES] [--checkpoint PAGES] [--cache KIB]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace {
using faultline::StepRecord;
namespace store = faultline::store;

struct Args {
  int ranks = 8;
  int64_t steps = 125000;
  std::vector<size_t> batches = {1000, 10000};
  std::string sync = "NORMAL";
  int checkpoint = store::Options{}.wal_autocheckpoint_pages;
  int page = store::Options{}.page_size;
  int cache = store::Options{}.cache_kib;
  std::string dir = std::filesystem::temp_directory_path().string();
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--ranks") {
      args.ranks = std::atoi(value.c_str());
    } else if (key == "--steps") {
      args.steps = std::atoll(value.c_str());
    } else if (key == "--sync") {
      args.sync = value;
    } else if (key == "--checkpoint") {
      args.checkpoint = std::atoi(value.c_str());
    } else if (key == "--cache") {
      args.cache = std::atoi(value.c_str());
    } else if (key == "--page") {
      args.page = std::atoi(value.c_str());
    } else if (key == "--dir") {
      args.dir = value;
    } else if (key == "--batches") {
      args.batches.clear();
      std::stringstream list(value);
      for (std::string item; std::getline(list, item, ',');)
        args.batches.push_back(std::stoul(item));
    } else {
      std::fprintf(stderr, "store_ingest: unknown option %s\n", key.c_str());
      std::exit(2);
    }
  }
  return args;
}

StepRecord record(int rank, int64_t step) {
  StepRecord r;
  r.rank = rank;
  r.step = step;
  r.t = 0.05 * static_cast<double>(step);
  r.loss = 10.0 / (1.0 + 0.001 * static_cast<double>(step)) + 0.01 * rank;
  r.grad_norm = 1.5;
  r.lr = 3e-4;
  r.step_ms = 48.25;
  r.data_ms = 1.5;
  r.comm_ms = 3.25;
  r.tokens = 8192;
  r.mem_bytes = 1'000'000'000 + step;
  r.mem_total_bytes = 80'000'000'000;
  r.param_norm = 123.5;
  r.nonfinite = 0;
  return r;
}

// The figures only mean something on a quiet machine: say how busy it was.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

// Inserts ranks × steps records, batch by batch, interleaving ranks as the harness's tail does.
double run(const Args& args, size_t batch_size) {
  const std::string path = args.dir + "/store_ingest-" + std::to_string(::getpid()) + "-" +
                           std::to_string(batch_size) + ".db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  store::Options options;
  options.synchronous = args.sync;
  options.wal_autocheckpoint_pages = args.checkpoint;
  options.page_size = args.page;
  options.cache_kib = args.cache;
  store::Store db = store::Store::open(path, options);
  store::RunInfo info;
  info.ranks = args.ranks;
  info.steps = args.steps;
  const int64_t run_id = db.create_run(info);

  std::vector<StepRecord> batch;
  batch.reserve(batch_size);
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  for (int64_t step = 0; step < args.steps; ++step) {
    for (int rank = 0; rank < args.ranks; ++rank) {
      batch.push_back(record(rank, step));
      if (batch.size() == batch_size) {
        db.add_steps(run_id, batch);
        batch.clear();
      }
    }
  }
  db.add_steps(run_id, batch);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const int64_t stored = db.summarize(run_id).steps;
  const double rate = static_cast<double>(stored) / seconds;
  std::printf(
      "batch %zu, synchronous=%s, page %d: %lld records in %.2f s, cpu %.2f s (%.3f ms per batch), "
      "records/s: %.0f\n",
      batch_size, args.sync.c_str(), args.page, static_cast<long long>(stored), seconds, cpu,
      1000.0 * seconds * static_cast<double>(batch_size) / static_cast<double>(stored), rate);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return rate;
}
}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  std::printf("load average at start: %s\n", load_average().c_str());
  double slowest = 0;
  for (size_t batch : args.batches) {
    const double rate = run(args, batch);
    slowest = slowest == 0 ? rate : std::min(slowest, rate);
  }
  std::printf("load average at end: %s\n", load_average().c_str());
  std::printf("records/s: %.0f\n", slowest);  // the slowest batch size tried
  return 0;
}
