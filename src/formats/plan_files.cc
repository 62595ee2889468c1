#include "formats/plan_files.h"

#include "common/check.h"
#include "formats/ranges.h"

namespace quantkit::formats {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<ArtifactKind> ArtifactKindFromPath(const std::string& path) {
  if (EndsWith(path, ".onnx")) return ArtifactKind::kOnnx;
  if (EndsWith(path, ".cache") || EndsWith(path, ".calib") || EndsWith(path, ".table")) {
    return ArtifactKind::kTrtCache;
  }
  if (EndsWith(path, ".json")) return ArtifactKind::kPlanJson;
  if (EndsWith(path, ".txt") || EndsWith(path, ".ranges")) return ArtifactKind::kRangesText;
  return MakeStatus(StatusCode::kInvalidArgument,
                    "{}: unknown file kind (use .onnx, .cache/.calib/.table, .json, .txt/.ranges)",
                    path);
}

Result<quant::QuantPlan> ReadPlanFile(const std::string& path, ArtifactKind kind) {
  switch (kind) {
    case ArtifactKind::kTrtCache: {
      QK_ASSIGN_OR_RETURN(TrtCache cache, ReadTrtCache(path));
      return PlanFromTrtCache(cache);
    }
    case ArtifactKind::kPlanJson:
      return ReadPlanJson(path);
    case ArtifactKind::kRangesText:
      return ReadRangesText(path);
    case ArtifactKind::kOnnx:
      break;
  }
  return MakeStatus(StatusCode::kInternal, "{}: a model is not a plan file", path);
}

Status WritePlanFile(const std::string& path, ArtifactKind kind, const quant::QuantPlan& plan,
                     const TrtCacheWriteOptions& cache) {
  switch (kind) {
    case ArtifactKind::kTrtCache:
      return WriteTrtCache(path, plan, cache);
    case ArtifactKind::kPlanJson:
      return WritePlanJson(path, plan);
    case ArtifactKind::kRangesText:
      return WriteRangesText(path, plan);
    case ArtifactKind::kOnnx:
      break;
  }
  return MakeStatus(StatusCode::kInternal, "{}: a model is not a plan file", path);
}

}  // namespace quantkit::formats
