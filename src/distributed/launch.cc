#include "distributed/launch.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "common/check.h"
#include "formats/qkstats_wire.h"

namespace quantkit::distributed {

Result<runtime::Device> SelectDevice(const std::string& text) {
  Result<std::optional<DistributedEnv>> env = ReadDistributedEnv();
  const std::optional<DistributedEnv> launch = env.ok() ? *env : std::nullopt;
  QK_ASSIGN_OR_RETURN(runtime::Device device, ParseDeviceForRank(text, launch));
  if (Status st = runtime::SetDefaultDevice(device); !st.ok()) {
    if (!launch.has_value() || text != "cuda") return st;
    return Status(st.code(),
                  st.message() +
                      " (plain `cuda` under a distributed launch is cuda:LOCAL_RANK; LOCAL_RANK=" +
                      std::to_string(launch->local_rank) + ")");
  }
  return device;
}

Status RefuseUnderLaunch(const std::string& what, const std::string& shared) {
  Result<std::optional<DistributedEnv>> env = ReadDistributedEnv();
  if (!env.ok() || !env->has_value() || (*env)->world_size == 1) return Status::Ok();
  return MakeStatus(StatusCode::kUnsupported,
                    "{} runs as one process, but this is rank {} of {} of a distributed launch; {} "
                    "(docs/distributed.md)",
                    what, (*env)->rank, (*env)->world_size, shared);
}

Result<std::optional<DistributedEnv>> CheckLaunch(const DistributedOptions& options) {
  QK_ASSIGN_OR_RETURN(std::optional<DistributedEnv> env, ReadDistributedEnv());
  QK_RETURN_IF_NOT(env || !options.required, StatusCode::kInvalidArgument,
                   "--distributed: this process was not launched by torchrun, srun torchrun or a "
                   "PyTorchJob (RANK and WORLD_SIZE are not set; see docs/distributed.md)");
  return env;
}

Result<std::unique_ptr<Communicator>> OpenCommunicator(const DistributedOptions& options) {
  QK_ASSIGN_OR_RETURN(std::optional<DistributedEnv> env, CheckLaunch(options));
  if (!env) return SingleProcessCommunicator();
  CommunicatorOptions o;
  o.timeout = options.timeout;
  return Connect(*env, o);
}

std::unique_ptr<data::Source> ShardForRank(std::unique_ptr<data::Source> source,
                                           const Communicator& comm, int64_t granule,
                                           RankReport* report) {
  report->rank = comm.rank();
  report->world_size = comm.world_size();
  report->shard = data::ShardOf(source->num_samples(), comm.rank(), comm.world_size(), granule);
  if (comm.world_size() == 1) return source;
  return data::Slice(std::move(source), report->shard);
}

Result<formats::StatsFile> MergeStatsOnRoot(Communicator& comm, formats::StatsFile local) {
  if (comm.world_size() == 1) return local;
  // Binary, exact (numbers travel as their bytes) and validated on decode, so a rank sending
  // something inconsistent is an error here, not a wrong plan. (The JSON .qkstats text it
  // replaces was 3.9 MB per rank on resnet_small and most of the merge time.)
  QK_ASSIGN_OR_RETURN(std::vector<std::string> all,
                      comm.GatherToRoot(formats::EncodeStatsWire(local), "gathering statistics"));
  if (!comm.is_root()) return local;
  formats::StatsFile merged;
  merged.model_sha256 = local.model_sha256;
  merged.histogram_log2_bins = local.histogram_log2_bins;
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string name = fmt::format("statistics of rank {}", r);
    QK_ASSIGN_OR_RETURN(formats::StatsFile part,
                        formats::DecodeStatsWire(all[r], name, local.model_sha256));
    QK_RETURN_IF_ERROR(formats::MergeStats(&merged, part).WithContext(name));
  }
  return merged;
}

std::string FormatRankLine(const RankReport& r) {
  const int64_t n = r.shard.size();
  std::string s = fmt::format("rank {}/{}: ", r.rank, r.world_size);
  s += n > 0 ? fmt::format("samples {}-{} ({})", r.shard.begin, r.shard.end - 1, n) : "no samples";
  if (r.passes > 1) s += fmt::format(", {} passes", r.passes);
  s += fmt::format(" in {:.2f} s ({:.1f} samples/s)", r.work_seconds,
                   static_cast<double>(n * r.passes) / std::max(r.work_seconds, 1e-9));
  if (r.rank == 0 && r.world_size > 1 && r.passes == 1) {  // many passes combine as they go
    s += fmt::format("; merge {:.3f} s, write {:.3f} s", r.merge_seconds, r.write_seconds);
  }
  return s;
}

}  // namespace quantkit::distributed
