#include "pipelines/diagnose.h"

#include <memory>
#include <utility>

namespace quantkit::pipelines {

Result<DiagnoseRun> Diagnose(analysis::DiagnoseOptions options,
                             const distributed::DistributedOptions& distributed) {
  QK_ASSIGN_OR_RETURN(std::unique_ptr<distributed::Communicator> comm, distributed::OpenCommunicator(distributed));
  options.comm = comm.get();
  DiagnoseRun run;
  QK_ASSIGN_OR_RETURN(run.result, analysis::Diagnose(options));
  const analysis::DiagnoseResult& r = run.result;
  run.rank.rank = r.rank;
  run.rank.world_size = r.world_size;
  run.rank.shard = r.shard;
  run.rank.work_seconds = r.collect_seconds;
  run.rank.merge_seconds = r.merge_seconds;
  run.rank.write_seconds = r.write_seconds;
  return run;
}

}  // namespace quantkit::pipelines
