// Plan files by extension: the one reader and writer of the QuantPlan hub's file formats, used by
// every pipeline (convert, eval --plan, analyze, fallback) so a format is added in one place.
//   .onnx                 a model (not a plan file: Q/DQ extraction is passes/extract_qdq.h)
//   .cache .calib .table  TensorRT calibration cache (formats/trt_cache.h)
//   .json                 quantkit plan JSON (formats/ranges.h)
//   .txt .ranges          sampleINT8API dynamic-range text (formats/ranges.h)
#pragma once

#include <string>

#include "formats/trt_cache.h"
#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::formats {

enum class ArtifactKind { kOnnx, kTrtCache, kPlanJson, kRangesText };

// kInvalidArgument naming the path for an unknown extension.
Result<ArtifactKind> ArtifactKindFromPath(const std::string& path);

// Reads a plan file of kind cache / json / text (kOnnx is rejected: it needs a model pass).
Result<quant::QuantPlan> ReadPlanFile(const std::string& path, ArtifactKind kind);
// Writes `plan` atomically as a cache / json / text file (kOnnx is rejected). `cache` applies to
// kTrtCache only.
Status WritePlanFile(const std::string& path, ArtifactKind kind, const quant::QuantPlan& plan,
                     const TrtCacheWriteOptions& cache);

}  // namespace quantkit::formats
