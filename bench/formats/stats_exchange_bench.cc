// stats_exchange_bench FILE.qkstats [RANKS]: what merging RANKS ranks' statistics costs on rank 0
// and on each sender, with the JSON .qkstats text (the exchange before) and the binary wire
// encoding (formats/qkstats_wire.h, the exchange now). Best of 5 runs of each step, CPU-bound
// steps only (the gather itself is a memcpy-speed socket transfer of the sizes printed).
//   build/dev/bench/formats/stats_exchange_bench out.qkstats 2
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "formats/qkstats.h"
#include "formats/qkstats_wire.h"

namespace {

using quantkit::formats::StatsFile;

double BestOf5(const std::function<void()>& step) {
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

template <typename T>
T Must(quantkit::Result<T> r) {
  if (!r.ok()) {
    std::fprintf(stderr, "stats_exchange_bench: %s\n", r.status().message().c_str());
    std::exit(2);
  }
  return std::move(*r);
}

// One rank's send (encode) and rank 0's receive side (decode every rank's bytes, merge in order).
void Measure(const char* label, const StatsFile& stats, int ranks,
             const std::function<std::string(const StatsFile&)>& encode,
             const std::function<quantkit::Result<StatsFile>(const std::string&)>& decode) {
  std::string bytes;
  const double enc = BestOf5([&] { bytes = encode(stats); });
  const double dec_merge = BestOf5([&] {
    StatsFile merged;
    merged.model_sha256 = stats.model_sha256;
    merged.histogram_log2_bins = stats.histogram_log2_bins;
    for (int r = 0; r < ranks; ++r) {
      StatsFile part = Must(decode(bytes));
      if (!quantkit::formats::MergeStats(&merged, part).ok()) std::exit(3);
    }
  });
  std::printf(
      "%-8s %10.2f MB per rank   encode %8.2f ms   decode+merge of %d ranks %8.2f ms   total %8.2f ms\n",
      label, static_cast<double>(bytes.size()) / 1e6, enc * 1e3, ranks, dec_merge * 1e3,
      (enc + dec_merge) * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: stats_exchange_bench FILE.qkstats [RANKS]\n");
    return 2;
  }
  const int ranks = argc > 2 ? std::atoi(argv[2]) : 2;
  const StatsFile stats = Must(quantkit::formats::ReadStatsFile(argv[1]));
  std::printf("%s: %zu tensors, merged as %d ranks\n", argv[1], stats.tensors.size(), ranks);
  const double merge_only = BestOf5([&] {
    StatsFile merged = stats;
    for (int r = 1; r < ranks; ++r) {
      if (!quantkit::formats::MergeStats(&merged, stats).ok()) std::exit(3);
    }
  });
  Measure("json", stats, ranks, quantkit::formats::SerializeStats,
          [](const std::string& b) { return quantkit::formats::ParseStats(b, "rank"); });
  Measure("binary", stats, ranks, quantkit::formats::EncodeStatsWire,
          [](const std::string& b) { return quantkit::formats::DecodeStatsWire(b, "rank"); });
  std::printf("MergeStats alone (%d ranks, incl. one copy): %.2f ms\n", ranks, merge_only * 1e3);
  return 0;
}
