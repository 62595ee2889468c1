#include "pipelines/diagnose/collection.h"

#include <fmt/format.h>

#include <utility>

#include "common/byte_io.h"
#include "common/check.h"
#include "formats/qkstats_wire.h"

namespace quantkit::pipelines {
namespace {

constexpr char kMagic[8] = {'Q', 'K', 'D', 'I', 'A', 'G', 'W', '1'};
constexpr uint32_t kByteOrder = 0x01020304;

// Collectors travel in the statistics' own binary form (formats/qkstats_wire.h, validated on
// decode); the model hash is checked once per run by the caller, not per collector set.
void PutCollectors(ByteWriter& out, const analysis::CollectorMap& collectors) {
  formats::StatsFile stats;
  stats.tensors = collectors;
  out.PutString(formats::EncodeStatsWire(stats));
}

Result<analysis::CollectorMap> GetCollectors(ByteReader& in, const std::string& what) {
  QK_ASSIGN_OR_RETURN(std::string bytes, in.GetString(what.c_str()));
  QK_ASSIGN_OR_RETURN(formats::StatsFile stats,
                      formats::DecodeStatsWire(bytes, in.source() + ": " + what));
  return std::move(stats.tensors);
}

void PutInputs(ByteWriter& out, const std::map<std::string, InputStatsAccumulator>& inputs) {
  out.Put(static_cast<uint32_t>(inputs.size()));
  for (const auto& [name, acc] : inputs) acc.Encode(&out);
}

// Appends each decoded input's batches after those already in `into` (a later rank's samples).
Status AppendInputs(ByteReader& in, std::map<std::string, InputStatsAccumulator>* into) {
  QK_ASSIGN_OR_RETURN(uint32_t n, in.Get<uint32_t>("the input count"));
  for (uint32_t i = 0; i < n; ++i) {
    QK_ASSIGN_OR_RETURN(InputStatsAccumulator acc, InputStatsAccumulator::Decode(&in));
    const std::string name = acc.input();
    QK_RETURN_IF_ERROR(into->try_emplace(name, name).first->second.Append(std::move(acc)));
  }
  return Status::Ok();
}

// The collectors of one set merged into another with the same tensors (exact merges).
Status MergeCollectors(analysis::CollectorMap* into, const analysis::CollectorMap& part,
                       const std::string& source) {
  QK_RETURN_IF_NOT(into->size() == part.size(), StatusCode::kInvalidArgument,
                   "{}: statistics of {} tensors, expected {}", source, part.size(), into->size());
  for (const auto& [name, collector] : part) {
    auto it = into->find(name);
    QK_RETURN_IF_NOT(it != into->end(), StatusCode::kInvalidArgument, "{}: unknown tensor '{}'",
                     source, name);
    QK_RETURN_IF_ERROR(
        it->second.Merge(collector).WithContext(fmt::format("{}: tensor '{}'", source, name)));
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeCollection(const DiagnoseCollection& part) {
  ByteWriter out;
  for (char c : kMagic) out.Put(c);
  out.Put(kByteOrder);
  out.Put(static_cast<int32_t>(part.chunks.size()));
  out.Put(static_cast<int32_t>(part.first_chunk));
  out.Put(static_cast<int32_t>(part.end_chunk));
  for (int c = part.first_chunk; c < part.end_chunk; ++c)
    PutCollectors(out, part.chunks[static_cast<size_t>(c)]);
  out.Put(static_cast<uint32_t>(part.channels.size()));
  for (const auto& [name, collector] : part.channels) {
    const quant::PerChannelStats s = collector.Finalize();
    out.PutString(name);
    out.Put(s.axis);
    out.Put(s.nonfinite_count);
    out.PutVector(s.amax);
  }
  PutInputs(out, part.inputs);
  PutCollectors(out, part.reference);
  PutInputs(out, part.reference_inputs);
  return out.Take();
}

Status AppendEncodedCollection(DiagnoseCollection* into, const std::string& bytes,
                               const std::string& source) {
  ByteReader in(bytes, source);
  for (char c : kMagic) {
    QK_ASSIGN_OR_RETURN(char got, in.Get<char>("the header"));
    QK_RETURN_IF_NOT(got == c, StatusCode::kInvalidArgument, "{}: not diagnose data (bad header)",
                     source);
  }
  QK_ASSIGN_OR_RETURN(uint32_t order, in.Get<uint32_t>("the byte order"));
  QK_RETURN_IF_NOT(order == kByteOrder, StatusCode::kInvalidArgument,
                   "{}: data from a machine of another byte order", source);
  QK_ASSIGN_OR_RETURN(int32_t chunks, in.Get<int32_t>("the chunk count"));
  QK_ASSIGN_OR_RETURN(int32_t first, in.Get<int32_t>("the first chunk"));
  QK_ASSIGN_OR_RETURN(int32_t end, in.Get<int32_t>("the end chunk"));
  // Ranks hold consecutive chunk ranges in rank order: this part starts where the previous ended.
  QK_RETURN_IF_NOT(chunks == static_cast<int32_t>(into->chunks.size()) &&
                       first == into->end_chunk && first <= end && end <= chunks,
                   StatusCode::kInvalidArgument,
                   "{}: chunks [{}, {}) of {} do not follow chunks [0, {}) of {}", source, first,
                   end, chunks, into->end_chunk, into->chunks.size());
  for (int32_t c = first; c < end; ++c) {
    QK_ASSIGN_OR_RETURN(analysis::CollectorMap part, GetCollectors(in, fmt::format("chunk {}", c)));
    analysis::CollectorMap& target = into->chunks[static_cast<size_t>(c)];
    QK_RETURN_IF_NOT(part.size() == target.size(), StatusCode::kInvalidArgument,
                     "{}: chunk {} has statistics of {} tensors, expected {}", source, c,
                     part.size(), target.size());
    target = std::move(part);  // filled by this rank alone
  }
  into->end_chunk = end;
  QK_ASSIGN_OR_RETURN(uint32_t channel_tensors, in.Get<uint32_t>("the channel tensor count"));
  for (uint32_t i = 0; i < channel_tensors; ++i) {
    QK_ASSIGN_OR_RETURN(std::string name, in.GetString("a tensor name"));
    quant::PerChannelStats s;
    QK_ASSIGN_OR_RETURN(s.axis, in.Get<int64_t>("the channel axis"));
    QK_ASSIGN_OR_RETURN(s.nonfinite_count, in.Get<int64_t>("the non-finite count"));
    QK_ASSIGN_OR_RETURN(s.amax, in.GetVector<float>("channel amax"));
    QK_RETURN_IF_NOT(s.axis >= 0 && s.nonfinite_count >= 0, StatusCode::kInvalidArgument,
                     "{}: inconsistent channel statistics of '{}'", source, name);
    auto it = into->channels.try_emplace(name, quant::PerChannelAbsMaxCollector(s.axis)).first;
    QK_RETURN_IF_ERROR(it->second.Merge(quant::PerChannelAbsMaxCollector::FromStats(s))
                           .WithContext(fmt::format("{}: tensor '{}'", source, name)));
  }
  QK_RETURN_IF_ERROR(AppendInputs(in, &into->inputs));
  QK_ASSIGN_OR_RETURN(analysis::CollectorMap reference, GetCollectors(in, "reference statistics"));
  QK_RETURN_IF_ERROR(MergeCollectors(&into->reference, reference, source));
  QK_RETURN_IF_ERROR(AppendInputs(in, &into->reference_inputs));
  return in.ExpectEnd();
}

Result<DiagnoseCollection> GatherCollectionOnRoot(distributed::Communicator& comm,
                                                  DiagnoseCollection local) {
  if (comm.world_size() == 1) return local;
  QK_ASSIGN_OR_RETURN(std::vector<std::string> parts,
                      comm.GatherToRoot(EncodeCollection(local), "gathering diagnose statistics"));
  if (!comm.is_root()) return DiagnoseCollection();
  // Rank 0's own part travels the same way as the others (and is checked the same way).
  DiagnoseCollection all;
  all.chunks.resize(local.chunks.size());
  for (size_t c = 0; c < local.chunks.size(); ++c) {
    for (const auto& [name, collector] : local.chunks[c])
      all.chunks[c].emplace(name, quant::TensorCollector());
  }
  for (const auto& [name, collector] : local.reference)
    all.reference.emplace(name, quant::TensorCollector());
  for (size_t r = 0; r < parts.size(); ++r) {
    QK_RETURN_IF_ERROR(
        AppendEncodedCollection(&all, parts[r], fmt::format("diagnose statistics of rank {}", r)));
  }
  QK_RETURN_IF_NOT(all.end_chunk == static_cast<int>(all.chunks.size()),
                   StatusCode::kInvalidArgument,
                   "the ranks' diagnose statistics cover chunks [0, {}) of {}", all.end_chunk,
                   all.chunks.size());
  return all;
}

}  // namespace quantkit::pipelines
