#include "runtime/kernel.h"
#include "runtime/ops/ops.h"
namespace quantkit::runtime {
void AppendResizeKernels(KernelTable&) {}
}  // namespace quantkit::runtime
