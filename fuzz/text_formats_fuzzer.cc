// Fuzzes quantkit's text formats with one input: the first byte picks the parser, the rest is
// the file. TensorRT calibration cache, dynamic-range text, plan JSON and .qkstats statistics.
// Properties: no crash, no sanitizer report, no exception escaping (errors are Status); what
// parses becomes a plan that ValidatePlan accepts, or a Status.
#include <cstddef>
#include <cstdint>
#include <string>

#include "formats/qkstats.h"
#include "formats/ranges.h"
#include "formats/trt_cache.h"
#include "quant/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace quantkit;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto cache = formats::ParseTrtCache(text, "fuzz.cache");
      if (!cache.ok()) return 0;
      const quant::QuantPlan plan = formats::PlanFromTrtCache(*cache);
      // Unusable scales become not-quantized entries: the plan is always valid.
      if (!quant::ValidatePlan(plan).ok()) __builtin_trap();
      (void)formats::FormatTrtCache(plan, {});
      return 0;
    }
    case 1: {
      auto plan = formats::ParseRangesText(text, "fuzz.txt");
      if (plan.ok() && !quant::ValidatePlan(*plan).ok()) __builtin_trap();
      return 0;
    }
    case 2: {
      auto plan = formats::ParsePlanJson(text, "fuzz.json");
      if (!plan.ok()) return 0;
      // What was accepted writes back and reads again.
      if (!formats::ParsePlanJson(formats::FormatPlanJson(*plan), "again.json").ok())
        __builtin_trap();
      return 0;
    }
    default: {
      auto stats = formats::ParseStats(text, "fuzz.qkstats", "");
      (void)stats;
      return 0;
    }
  }
}
