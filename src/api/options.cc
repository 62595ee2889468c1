// include/quantkit/options.h: the process-wide settings over runtime/ and distributed/.
#include "quantkit/options.h"

#include <chrono>
#include <cmath>

#include "api/internal.h"
#include "common/check.h"
#include "distributed/launch.h"
#include "runtime/threads.h"

namespace quantkit {

Result<int> SetComputeThreads(int threads) { return runtime::SetComputeThreads(threads); }

Result<std::string> SetDevice(const std::string& device) {
  QK_ASSIGN_OR_RETURN(runtime::Device chosen, distributed::SelectDevice(device));
  return chosen.ToString();
}

Status RefuseUnderLaunch(const std::string& what, const std::string& shared) {
  return distributed::RefuseUnderLaunch(what, shared);
}

namespace api {

Result<distributed::DistributedOptions> ToDistributedOptions(const DistributedOptions& o) {
  QK_RETURN_IF_NOT(
      std::isfinite(o.timeout_seconds) && o.timeout_seconds >= 1 && o.timeout_seconds <= 86400,
      StatusCode::kInvalidArgument, "the distributed timeout must be in [1, 86400] seconds, got {}",
      o.timeout_seconds);
  distributed::DistributedOptions d;
  d.required = o.required;
  d.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000.0));
  return d;
}

RankSummary ToRankSummary(const distributed::RankReport& r) {
  RankSummary s;
  s.rank = r.rank;
  s.world_size = r.world_size;
  if (r.world_size > 1) s.line = distributed::FormatRankLine(r);
  return s;
}

}  // namespace api
}  // namespace quantkit
