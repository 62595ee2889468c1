// The kernel table.
//
// Rows are (domain, op_type, since_version, until_version, factory), grouped by op family in
// ops/*.cc (each file has one Append*Kernels function holding its rows). A model importing opset
// N for a domain gets the row whose [since, until] range contains N.
//
// How to add an opset version of an op (say Foo changes semantics at opset 21):
//   1. In Foo's Append* function, close the existing row: until_version = 20.
//   2. Add a row {"", "Foo", 21, kLatestOpset, MakeFoo21} (or reuse MakeFoo and branch on
//      init.opset inside the factory when only attribute parsing differs: the factory sees the
//      opset, so "axes moved from attribute to input" is a branch in construction, not compute).
//   3. Add the node tests of the new version to tests/conformance (remove their skips).
// Ranges of one op must not overlap; RegistryTest.RangesDoNotOverlap checks it.
#include "runtime/registry.h"

#include <mutex>

#include "runtime/ops/ops.h"

namespace quantkit::runtime {

namespace {

KernelTable BuildTable() {
  KernelTable table;
  AppendElementwiseKernels(table);
  AppendMathKernels(table);
  AppendConvKernels(table);
  AppendReduceKernels(table);
  AppendShapeKernels(table);
  AppendIndexKernels(table);
  AppendNormKernels(table);
  AppendQuantKernels(table);
  AppendControlFlowKernels(table);
  AppendRnnKernels(table);
  AppendResizeKernels(table);
  AppendMiscKernels(table);
  return table;
}

}  // namespace

const KernelTable& RegisteredKernels() {
  static const KernelTable table = BuildTable();  // built on first use, thread-safe
  return table;
}

KernelFactory FindKernel(const std::string& domain, const std::string& op_type, int64_t opset) {
  for (const KernelEntry& e : RegisteredKernels()) {
    if (e.op_type == op_type && e.domain == domain && e.since_version <= opset &&
        opset <= e.until_version) {
      return e.factory;
    }
  }
  return nullptr;
}

}  // namespace quantkit::runtime
