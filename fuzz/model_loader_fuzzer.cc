// Fuzzes the model loader: arbitrary bytes -> ImportModelFromBytes. Properties checked:
//  - no crash, no sanitizer report, no abort (errors are Status values);
//  - a model that imports exports again, and that export imports again (round trip);
//  - PromoteConstants keeps an imported model valid.
// External data is disabled (no base_dir): file access is covered by the unit tests.
#include <cstddef>
#include <cstdint>

#include "ir/verifier.h"
#include "onnx/export.h"
#include "onnx/import.h"
#include "passes/promote_constants.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quantkit;
  auto model = onnx_io::ImportModelFromBytes(data, size, {}, "fuzz.onnx");
  if (!model.ok()) return 0;
  auto bytes = onnx_io::ExportModelToBytes(*model);
  // A model that imported has bounded size: its export must succeed and load again.
  if (!bytes.ok()) __builtin_trap();
  auto again = onnx_io::ImportModelFromBytes(*bytes, {}, "fuzz-roundtrip.onnx");
  if (!again.ok()) __builtin_trap();
  if (!passes::PromoteConstants(*model->graph).ok()) return 0;
  if (!ir::Verify(*model).ok()) __builtin_trap();
  return 0;
}
