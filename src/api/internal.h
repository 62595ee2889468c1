// The public API's handles over the internal types, and the conversions of its option structs:
// shared by the public API's implementation files (calibration.cc, collector.cc,
// pipelines.cc). Not part of the public API. Each public option is converted to its internal form
// here, once.
#pragma once

#include "data/image_options.h"
#include "distributed/launch.h"
#include "formats/trt_cache.h"
#include "passes/float_precision.h"
#include "passes/qdq_placement.h"
#include "pipelines/calibration_steps.h"
#include "quant/plan.h"
#include "quantkit/calibration.h"
#include "quantkit/data_source.h"
#include "quantkit/status.h"

namespace quantkit {

struct Model::Impl {
  pipelines::LoadedModel loaded;
};
struct Statistics::Impl {
  pipelines::Statistics statistics;
};
struct Plan::Impl {
  quant::QuantPlan plan;
};

namespace api {

// The largest budget of a fallback search: quantkit/calibration.h's.
using quantkit::kMaxBudget;

// kInvalidArgument "<what> is empty (default-constructed)" unless `valid`.
Status RequireValid(bool valid, const char* what);
quantkit::Plan MakePublicPlan(quant::QuantPlan plan);
quantkit::Statistics MakePublicStatistics(pipelines::Statistics statistics);

// The declared preprocessing as text (the CLI's option strings) -> data::ImageOptions.
Result<data::ImageOptions> ToImageOptions(const ImagePreprocessing& preprocessing);
passes::PlacementOptions ToPlacementOptions(const Placement& placement);
// Method names parsed ("percentile:99.9"); overrides are checked against the sites by BuildPlan.
Result<pipelines::MethodChoice> ToMethodChoice(const MethodChoices& choices);
// The float part a writer is asked for: nullopt when dtype, cast_io and keep_fp32 are all unset
// (convert and fallback then keep a plan's own); int8 must be true.
Result<std::optional<passes::FloatOptions>> ToFloatOverride(const FloatPart& floats);
// The timeout range-checked (1 to 86400 s).
Result<distributed::DistributedOptions> ToDistributedOptions(const DistributedChoices& choices);
// The rank's fields of a report: rank, world size and, under a launch, its summary line.
template <typename Report>
void SetRank(const distributed::RankReport& rank, Report* report) {
  report->rank = rank.rank;
  report->world_size = rank.world_size;
  report->rank_line = rank.world_size > 1 ? distributed::FormatRankLine(rank) : std::string();
}
// The TensorRT version and calibrator names parsed.
Result<formats::TrtCacheWriteOptions> ToTrtCacheOptions(const CacheOptions& cache);

}  // namespace api
}  // namespace quantkit
