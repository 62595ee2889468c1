// Dynamic-range files produced from (and read into) a QuantPlan.
//
// * Text, sampleINT8API style (calibration-spec §1.5): one `<tensor>:<amax>` line per tensor. The
//   value is amax, not scale; TensorRT applies setDynamicRange(-amax, amax). Written without
//   spaces around ':' because sampleINT8API's reader splits with getline(':') and would keep a
//   trailing space in the name. quantkit's reader splits on the last ':' (names may contain ':').
// * JSON, quantkit's plan file: versioned, key-sorted, with provenance, every tensor's scale,
//   amax, zero point, axis, role and source, and the float-kept nodes. It is the lossless
//   serialization of a QuantPlan; unknown versions and keys are rejected.
#pragma once

#include <string>

#include "quant/plan.h"
#include "quantkit/status.h"

namespace quantkit::formats {

inline constexpr int kPlanJsonVersion = 1;
inline constexpr const char* kPlanJsonFormat = "quantkit.plan";

// Per-tensor quantized entries only (per-channel weights have no single range).
std::string FormatRangesText(const quant::QuantPlan& plan);
Result<quant::QuantPlan> ParseRangesText(const std::string& text, const std::string& source_name);

std::string FormatPlanJson(const quant::QuantPlan& plan);
Result<quant::QuantPlan> ParsePlanJson(const std::string& text, const std::string& source_name);

Status WriteRangesText(const std::string& path, const quant::QuantPlan& plan);
Result<quant::QuantPlan> ReadRangesText(const std::string& path);
Status WritePlanJson(const std::string& path, const quant::QuantPlan& plan);
Result<quant::QuantPlan> ReadPlanJson(const std::string& path);

}  // namespace quantkit::formats
