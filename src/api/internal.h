// The public API's handles over the internal types, and the conversions of its option structs:
// shared by the public API's implementation files (calibration.cc, collector.cc,
// pipelines.cc). Not part of the public API. Each public option is converted to its internal form here, once.
#pragma once

#include "data/image_options.h"
#include "distributed/launch.h"
#include "formats/trt_cache.h"
#include "passes/float_precision.h"
#include "passes/insert_qdq.h"
#include "passes/qdq_placement.h"
#include "pipelines/calibration_stages.h"
#include "pipelines/ptq_stages.h"
#include "quant/plan.h"
#include "quantkit/calibration.h"
#include "quantkit/data_source.h"
#include "quantkit/options.h"
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

// kInvalidArgument "<what> is empty (default-constructed)" unless `valid`.
Status RequireValid(bool valid, const char* what);
quantkit::Plan MakePublicPlan(quant::QuantPlan plan);
quantkit::Statistics MakePublicStatistics(pipelines::Statistics statistics);

// The declared preprocessing as text (the CLI's option strings) -> data::ImageOptions.
Result<data::ImageOptions> ToImageOptions(const ImagePreprocessing& preprocessing);
passes::PlacementOptions ToPlacementOptions(const Placement& placement);
// Method names parsed ("percentile:99.9"); overrides are checked against the sites by BuildPlan.
Result<pipelines::MethodChoice> ToMethodChoice(const MethodChoices& choices);
// The TensorRT version and calibrator names parsed.
Result<formats::TrtCacheWriteOptions> ToTrtCacheOptions(const CacheOptions& cache);
// The float part of a written model: its dtype parsed (empty: the default); the override form is
// nullopt when neither dtype, cast_io nor keep_fp32 is given (a plan.json's own precision then).
Result<passes::FloatOptions> ToFloatOptions(const FloatOutputOptions& floats);
Result<std::optional<passes::FloatOptions>> ToFloatOverride(const FloatOutputOptions& floats);
Result<passes::WeightStorage> ToWeightStorage(const FloatOutputOptions& floats);
// The stages parsed, the memory bound checked.
Result<pipelines::PtqOptions> ToPtqOptions(const PtqOptions& ptq, bool progress);
// The timeout checked ([1, 86400] s) and converted.
Result<distributed::DistributedOptions> ToDistributedOptions(const DistributedOptions& options);
RankSummary ToRankSummary(const distributed::RankReport& report);

}  // namespace api
}  // namespace quantkit
