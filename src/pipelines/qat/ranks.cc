// QAT step 5, sharding (docs/distributed.md): under torchrun/srun/a PyTorchJob the global batch
// is split over the ranks, the gradients are averaged in rank order before each optimizer step
// (the same bits on every rank); validation.cc sums its scores over the ranks. One process is
// the one-rank case of the same code.
#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "pipelines/qat/steps.h"

namespace quantkit::pipelines::qat {

std::vector<int64_t> RankSlice(const std::vector<int64_t>& perm, int64_t offset, int rank,
                               int64_t local_batch) {
  const int64_t mine = offset + rank * local_batch;  // all of it in one process
  return std::vector<int64_t>(perm.begin() + mine, perm.begin() + mine + local_batch);
}

// Every rank's gradients and step result, added in rank order (in double) and divided by the
// number of ranks. Each rank's loss is the mean over its equal share of the global batch, so the
// average is the global batch's gradient; rank order makes the sum, and so the update, the same
// bits on every rank.
Status AverageOverRanks(distributed::Communicator& comm, std::vector<float>* gradients,
                        train::StepResult* r) {
  const double losses[4] = {r->loss, r->distill, r->label, r->feature};
  std::string bytes(reinterpret_cast<const char*>(losses), sizeof(losses));
  bytes.append(reinterpret_cast<const char*>(gradients->data()), gradients->size() * sizeof(float));
  QK_ASSIGN_OR_RETURN(std::vector<std::string> all, comm.AllGather(bytes, "averaging gradients"));
  std::vector<double> sum(gradients->size(), 0.0);
  double loss_sum[4] = {0, 0, 0, 0};
  for (const std::string& part : all) {
    QK_RETURN_IF_NOT(part.size() == bytes.size(), StatusCode::kInternal,
                     "a rank sent {} bytes of gradients, this rank {}", part.size(), bytes.size());
    double l[4];
    std::memcpy(l, part.data(), sizeof(l));
    for (int i = 0; i < 4; ++i) loss_sum[i] += l[i];
    const char* g = part.data() + sizeof(l);
    for (size_t i = 0; i < sum.size(); ++i) {
      float v;
      std::memcpy(&v, g + i * sizeof(float), sizeof(float));
      sum[i] += v;
    }
  }
  const double n = static_cast<double>(all.size());
  for (size_t i = 0; i < sum.size(); ++i) (*gradients)[i] = static_cast<float>(sum[i] / n);
  r->loss = loss_sum[0] / n, r->distill = loss_sum[1] / n, r->label = loss_sum[2] / n,
  r->feature = loss_sum[3] / n;
  return Status::Ok();
}

}  // namespace quantkit::pipelines::qat
