// Fuzzes the PNG/JPEG decoder used by image-folder data sources (libpng, libjpeg behind
// data::DecodeImageBytes). Properties: no crash, no sanitizer report, no longjmp out of the
// decoder's error handler leaking or skipping cleanup, dimensions bounded before allocation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quantkit;
  auto image =
      data::DecodeImageBytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.img");
  (void)image;
  return 0;
}
