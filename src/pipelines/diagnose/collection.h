// What `diagnose`'s passes over the data leave for its analysis, and how the ranks of a
// distributed run bring theirs to rank 0 (docs/distributed.md).
//
// Each rank runs a contiguous shard of the calibration data whose boundaries fall on chunk
// boundaries (multiples of the chunk size k): batches restart at every chunk boundary
// (data::BatchRanges), so each rank runs exactly the batches one process runs, and every chunk's
// collectors are filled by one rank alone. The reference data is sharded on whole batches. Rank 0
// then receives every rank's part in rank order and:
//   - takes each chunk's collectors from the rank that filled it (no arithmetic at all);
//   - merges the per-channel abs-max (a max) and the reference collectors (exact merges);
//   - appends the input statistics, which are kept per batch, in rank order = sample order.
// So rank 0 holds what one process collects, bit for bit, and its report is one process's report.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analysis/collect_pass.h"
#include "distributed/communicator.h"
#include "pipelines/diagnose/inputs.h"
#include "quant/collectors/per_channel.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct DiagnoseCollection {
  std::vector<analysis::CollectorMap>
      chunks;  // by global chunk index; this rank fills [first_chunk, end_chunk)
  int first_chunk = 0, end_chunk = 0;
  std::map<std::string, quant::PerChannelAbsMaxCollector>
      channels;  // axis-1 abs-max of NCHW tensors
  std::map<std::string, InputStatsAccumulator> inputs;
  analysis::CollectorMap reference;  // empty without reference data
  std::map<std::string, InputStatsAccumulator> reference_inputs;
};

// This rank's part as bytes (common/byte_io.h): the chunks it filled, its channel abs-max, its
// input statistics and its reference collectors.
std::string EncodeCollection(const DiagnoseCollection& part);

// Adds a part decoded from `bytes` (a later rank's) into `into`; errors name `source` (e.g.
// "diagnose data of rank 1"), and a part that does not fit (a chunk index out of range or filled
// twice, other tensors) is an error, never a wrong report.
Status AppendEncodedCollection(DiagnoseCollection* into, const std::string& bytes,
                               const std::string& source);

// Every rank calls it: rank 0 gets every rank's part combined in rank order, the other ranks an
// empty collection. A single process gets its own part back untouched.
Result<DiagnoseCollection> GatherCollectionOnRoot(distributed::Communicator& comm,
                                                  DiagnoseCollection local);

}  // namespace quantkit::pipelines
