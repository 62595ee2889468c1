// Fuzzes .npz archives through data::OpenSource (libzip, then the .npy parser on each member)
// and reads every sample of the source. Properties: no crash, no sanitizer report, no allocation
// beyond what libFuzzer's -malloc_limit_mb allows (a member declaring gigabytes must be refused
// or streamed, never allocated), errors come back as Status.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "data/source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quantkit;
  // libzip reads from a path: one file per fuzzer process, rewritten for every input.
  static const std::string path = "/tmp/quantkit_npz_fuzzer_" + std::to_string(::getpid()) + ".npz";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  const std::vector<data::InputSpec> inputs{{"x", ir::DType::kFloat, {-1, 4}}};
  auto source = data::OpenSource(path, inputs, {});
  if (!source.ok()) return 0;
  const int64_t n = (*source)->num_samples();
  for (int64_t s = 0; s < n && s < 64; s += 16) {
    auto batch = (*source)->Read(s, std::min<int64_t>(16, n - s));
    if (!batch.ok()) return 0;
  }
  return 0;
}
