// `quantkit diagnose` as one process or as the ranks of a torch.distributed launch
// (docs/distributed.md): each rank runs its shard of the data, rank 0 analyses every rank's
// statistics and alone writes -o; its report is one process's report, timing aside.
#pragma once

#include "pipelines/diagnose/diagnose.h"
#include "distributed/launch.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct DiagnoseRun {
  analysis::DiagnoseResult
      result;       // the whole report on rank 0; on the others only its rank fields
  distributed::RankReport rank;  // this rank's summary line
};

Result<DiagnoseRun> Diagnose(analysis::DiagnoseOptions options,
                             const distributed::DistributedOptions& distributed);

}  // namespace quantkit::pipelines
