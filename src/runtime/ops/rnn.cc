#include "runtime/kernel.h"
#include "runtime/ops/ops.h"
namespace quantkit::runtime {
void AppendRnnKernels(KernelTable&) {}
}  // namespace quantkit::runtime
