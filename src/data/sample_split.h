// Sample-exact runs: a batch as one-sample batches, so that a sample's activations never depend on
// the samples batched beside it (ATen picks its summation order by batch size; see
// analysis::kSampleExactRunBatch). The one splitter of batches a caller hands in: the Python
// StatsCollector and the public CollectStatistics(BatchStream) use it, as the CLI's calibration
// reads one sample per run from its source (analysis::ReadInOrder with run_batch).
#pragma once

#include <vector>

#include "data/source.h"

namespace quantkit::data {

// Sample i of `batch` for every i < batch.size. Inputs batched on the leading axis become views of
// row i (no copy; the view keeps the batch's bytes alive); other inputs (unbatched, or batched on
// another axis) are passed whole to every sample, as a run with the whole batch would see them.
// Labels become row i. A batch of one sample is returned as it is.
std::vector<Batch> SplitIntoSamples(const Batch& batch, const std::vector<InputSpec>& inputs);

}  // namespace quantkit::data
