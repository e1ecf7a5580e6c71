// The statements a Store handle prepares once and reuses for every batch (internal).
#pragma once

#include "store/sqlite_util.hpp"
#include "store/store.hpp"

namespace faultline::store {

struct Store::Cache {
  std::string path;  // the statements' copy: it stays put when the Store is moved
  detail::Statement insert_step, insert_anomaly, insert_event, insert_fingerprint, insert_gpu;
};

}  // namespace faultline::store
