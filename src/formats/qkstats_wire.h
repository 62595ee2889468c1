// The statistics of a .qkstats file as compact bytes, for the processes of one distributed job
// to exchange (distributed/launch.h: the merge). Not a file format: .qkstats files stay JSON,
// readable and versioned (formats/qkstats.h); this encoding only travels between ranks of one run.
//
// Why: the JSON text of resnet_small's statistics is 3.9 MB per rank, and printing and parsing
// it was most of the merge (docs/distributed.md "Merge cost"). Here every number is copied as
// its bytes, so the encoding is exact by construction (floats keep their bits, NaN payloads
// included), and histograms are sparse (bin index, count) pairs as in the JSON.
//
//   "QKSTWIR2" u32 0x01020304 (byte order check) i32 log2_bins  str model_sha256  u32 tensors
//   per tensor: str name, range (5 x i64 counts, 3 x f32 min/max/amax),
//               u8 has_histogram (0: range-only statistics of the max-only fast path)
//               [histogram (u8 has_range, i32 range_exp, i64 zeros, i64 nonfinite,
//                           positive and negative: u32 n, n x (u32 bin, i64 count))],
//               u8 per_channel [i64 axis, i64 nonfinite, u32 n, n x f32 amax]
//   str = u32 length + bytes; integers and floats in the host byte order (common/byte_io.h).
//
// Decoding validates like the JSON reader (sizes, bin order and range, positive counts, the
// histogram against range.count, the histogram's own invariants) and names `source` in errors:
// a rank that sends something inconsistent is an error, never a wrong plan.
#pragma once

#include <string>

#include "formats/qkstats.h"
#include "quantkit/status.h"

namespace quantkit::formats {

std::string EncodeStatsWire(const StatsFile& stats);
// expected_model_sha256 empty = accept any model.
Result<StatsFile> DecodeStatsWire(const std::string& bytes, const std::string& source,
                                  const std::string& expected_model_sha256 = "");

}  // namespace quantkit::formats
