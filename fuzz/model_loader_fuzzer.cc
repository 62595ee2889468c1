// Fuzzes the model loader: arbitrary bytes -> ImportModelFromBytes. Properties checked:
//  - no crash, no sanitizer report, no abort (errors are Status values);
//  - a model that imports exports again, and that export imports again (round trip);
//  - PromoteConstants keeps an imported model valid.
// External data is enabled: the base directory holds `w.bin` (256 bytes), a FIFO `fifo.bin` and
// a directory `dir.bin`, so fuzzed locations, offsets and lengths reach the real checks (and a
// FIFO location must be refused, not block the fuzzer).
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ir/verifier.h"
#include "onnx/export.h"
#include "onnx/import.h"
#include "passes/promote_constants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quantkit;
  static const std::string base = [] {
    std::string dir = "/tmp/quantkit_model_fuzzer_" + std::to_string(::getpid());
    ::mkdir(dir.c_str(), 0755);
    if (FILE* f = std::fopen((dir + "/w.bin").c_str(), "wb")) {
      for (int i = 0; i < 256; ++i) std::fputc(i, f);
      std::fclose(f);
    }
    ::mkfifo((dir + "/fifo.bin").c_str(), 0644);
    ::mkdir((dir + "/dir.bin").c_str(), 0755);
    return dir;
  }();
  onnx_io::ImportOptions options;
  options.base_dir = base;
  // With external data: only the loader's own properties (no crash, no hang, Status errors).
  (void)onnx_io::ImportModelFromBytes(data, size, options, "fuzz-external.onnx");
  auto model = onnx_io::ImportModelFromBytes(data, size, {}, "fuzz.onnx");
  if (!model.ok()) return 0;
  auto bytes = onnx_io::ExportModelToBytes(*model);
  // A model that imported has bounded size: its export must succeed and load again.
  if (!bytes.ok()) __builtin_trap();
  auto again = onnx_io::ImportModelFromBytes(*bytes, {}, "fuzz-roundtrip.onnx");
  if (!again.ok()) __builtin_trap();
  if (!passes::RunPass(*model, passes::PromoteConstants()).ok()) return 0;
  if (!ir::Verify(*model).ok()) __builtin_trap();
  return 0;
}
