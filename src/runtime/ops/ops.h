// Each op group file exports one function appending its rows to the registry table (called from
// registry.cc, in order; no static registration).
#pragma once

#include "runtime/registry.h"

namespace quantkit::runtime {

void AppendElementwiseKernels(KernelTable& table);
void AppendMathKernels(KernelTable& table);
void AppendConvKernels(KernelTable& table);
void AppendReduceKernels(KernelTable& table);
void AppendShapeKernels(KernelTable& table);
void AppendIndexKernels(KernelTable& table);
void AppendNormKernels(KernelTable& table);
void AppendQuantKernels(KernelTable& table);
void AppendControlFlowKernels(KernelTable& table);
void AppendRnnKernels(KernelTable& table);
void AppendResizeKernels(KernelTable& table);
void AppendMiscKernels(KernelTable& table);

}  // namespace quantkit::runtime
