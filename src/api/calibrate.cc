// quantkit::Calibrate (include/quantkit/calibration.h): the public calibrate options converted
// once, then the one pipeline they ask for (a plain calibration, the method comparison or
// --method auto, or the budget search), and its report with the text the CLI prints.
#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/report_json.h"
#include "api/internal.h"
#include "common/check.h"
#include "distributed/launch.h"
#include "pipelines/calibrate/budget.h"
#include "pipelines/calibrate/calibrate.h"
#include "pipelines/calibrate/check.h"
#include "pipelines/calibrate/compare_methods.h"
#include "pipelines/calibrate/repair.h"
#include "pipelines/ptq/stages.h"
#include "quantkit/calibration.h"

namespace quantkit {
namespace {

static_assert(kDefaultDistributedTimeoutSeconds == distributed::kDefaultDistributedTimeout.count());
static_assert(passes::kDefaultFloatDType == quant::FloatDType::kFloat16,
              "kDefaultFloatDTypeName says fp16");

constexpr int64_t kMaxPtqMemoryMib = int64_t{1} << 30;

enum class CalibrateMode { kPlain, kCompare, kBudget };

// The public options as the pipelines take them; every error here comes before any compute.
struct CalibrateRequest {
  CalibrateMode mode = CalibrateMode::kPlain;
  bool auto_method = false;
  pipelines::CalibrateOptions calibrate;
  pipelines::RepairOptions repair;  // kPlain only
};

Status ConvertFloatPart(const FloatPart& f, pipelines::CalibrateOptions* c) {
  if (!f.dtype.empty()) {
    QK_ASSIGN_OR_RETURN(c->floats.dtype, quant::ParseFloatDType(f.dtype));
  }
  c->floats.cast_io = f.cast_io;
  c->floats.keep_fp32 = f.keep_fp32;
  QK_ASSIGN_OR_RETURN(c->weight_storage, passes::ParseWeightStorage(f.weight_storage));
  c->int8 = f.int8;
  return Status::Ok();
}

Status ConvertPtq(const PtqChoices& p, bool progress, pipelines::PtqOptions* out) {
  QK_ASSIGN_OR_RETURN(out->stages, pipelines::ParsePtqStages(p.stages));
  QK_RETURN_IF_NOT(p.memory_mib >= 1 && p.memory_mib <= kMaxPtqMemoryMib,
                   StatusCode::kInvalidArgument, "--ptq-memory must be in [1, {}] MiB, got {}",
                   kMaxPtqMemoryMib, p.memory_mib);
  out->samples = p.samples;
  out->batch = p.batch;
  out->memory_bytes = p.memory_mib << 20;
  out->seed = p.seed;
  out->progress = progress;
  return pipelines::CheckPtqOptions(*out);
}

Result<CalibrateRequest> ToRequest(const CalibrateOptions& o) {
  CalibrateRequest r;
  pipelines::CalibrateOptions& c = r.calibrate;
  c.model = o.model;
  c.data = o.data;
  c.from_stats = o.from_stats;
  QK_ASSIGN_OR_RETURN(c.image, api::ToImageOptions(o.data_options.image));
  c.samples = o.data_options.samples;
  c.batch_size = o.data_options.batch_size;
  QK_RETURN_IF_NOT(o.run_batch >= 0, StatusCode::kInvalidArgument, "run_batch must be >= 0, got {}",
                   o.run_batch);
  if (o.run_batch > 0) c.run_batch = o.run_batch;
  // auto is a choice among the methods made on held-out data; the overrides still apply.
  r.auto_method = o.methods.method == "auto";
  MethodChoices methods = o.methods;
  if (r.auto_method) methods.method = "max";
  QK_ASSIGN_OR_RETURN(pipelines::MethodChoice choice, api::ToMethodChoice(methods));
  c.method = choice.method;
  c.method_overrides = std::move(choice.overrides);
  c.placement = api::ToPlacementOptions(o.placement);
  QK_RETURN_IF_ERROR(ConvertFloatPart(o.floats, &c));
  c.output_dir = o.output_dir;
  c.stats_out = o.stats_out;
  QK_ASSIGN_OR_RETURN(c.cache, api::ToTrtCacheOptions(o.cache));
  c.progress = o.progress;
  QK_RETURN_IF_ERROR(ConvertPtq(o.ptq, o.progress, &c.ptq));
  QK_RETURN_IF_NOT(o.check_samples >= kAutoCheckSamples, StatusCode::kInvalidArgument,
                   "check_samples must be -1 (automatic), 0 (no check) or a count, got {}",
                   o.check_samples);
  QK_RETURN_IF_NOT(o.holdout_samples >= 0, StatusCode::kInvalidArgument,
                   "holdout_samples must be >= 0 (0: all), got {}", o.holdout_samples);
  c.check.samples = o.check_samples;
  c.check.holdout = o.holdout;
  c.check.holdout_samples = o.holdout_samples;
  QK_ASSIGN_OR_RETURN(c.distributed, api::ToDistributedOptions(o.distributed));
  // Read only, and `o` outlives the call that uses `c`.
  if (o.statistics.valid()) c.statistics = &o.statistics.impl().statistics;

  QK_RETURN_IF_NOT(o.repair == "auto" || o.repair == "off", StatusCode::kInvalidArgument,
                   "--repair '{}': use auto or off", o.repair);
  r.repair.enabled = o.repair == "auto";
  r.repair.time_cap_seconds = o.repair_time_seconds;
  QK_RETURN_IF_ERROR(pipelines::CheckRepairOptions(r.repair));
  if (o.budget) {
    QK_RETURN_IF_NOT(
        !o.compare_methods && !r.auto_method, StatusCode::kInvalidArgument,
        "--budget repairs one method's plan: give --method max|entropy|percentile|mse, not "
        "--compare-methods or --method auto");
    QK_RETURN_IF_NOT(std::isfinite(*o.budget) && *o.budget >= 0 && *o.budget <= api::kMaxBudget,
                     StatusCode::kInvalidArgument, "--budget must be in [0, {}], got {}",
                     api::kMaxBudget, *o.budget);
    r.mode = CalibrateMode::kBudget;
  } else if (o.compare_methods || r.auto_method) {
    r.mode = CalibrateMode::kCompare;
  }
  return r;
}

void SetCheck(const pipelines::CheckResult& check, CalibrateReport* report) {
  report->check = {check.ran,  check.data,      check.origin,  check.samples, check.agreement,
                   check.top1, check.fp32_top1, check.rel_mse, check.seconds, check.warning};
}

void SetRepair(const pipelines::RepairReport& r, CalibrateReport* report) {
  CalibrateRepair& out = report->repair;
  out = {r.ran,     r.not_run, r.target, r.holdout, r.cap_seconds,
         r.seconds, {},        r.kept,   r.met,     r.next};
  for (const pipelines::RepairRung& g : r.rungs) {
    out.rungs.push_back({g.name, g.detail, g.skipped, g.passes, g.agreement, g.rel_mse, g.seconds});
  }
}

// `calibrate --json` of a plain calibration: what was written, the check and the repair ladder.
std::string PlainJson(const CalibrateReport& r) {
  const CalibrateCheck& c = r.check;
  nlohmann::json j{{"written", r.written},
                   {"warnings", r.warnings},
                   {"samples", r.samples},
                   {"seconds", r.seconds}};
  if (c.ran) {
    j["check"] = {{"data", c.data},
                  {"origin", c.origin},
                  {"samples", c.samples},
                  {"agreement", analysis::report::Num(c.agreement)},
                  {"top1", analysis::report::Num(c.top1)},
                  {"fp32_top1", analysis::report::Num(c.fp32_top1)},
                  {"rel_mse", analysis::report::Num(c.rel_mse)},
                  {"seconds", c.seconds},
                  {"warning", c.warning}};
  }
  const CalibrateRepair& p = r.repair;
  nlohmann::json rungs = nlohmann::json::array();
  for (const CalibrateRepairRung& g : p.rungs) {
    rungs.push_back({{"name", g.name},
                     {"detail", g.detail},
                     {"skipped", g.skipped},
                     {"passes", g.passes},
                     {"agreement", analysis::report::Num(g.agreement)},
                     {"rel_mse", analysis::report::Num(g.rel_mse)},
                     {"seconds", g.seconds}});
  }
  j["repair"] = {{"ran", p.ran},
                 {"not_run", p.not_run},
                 {"target", p.target},
                 {"holdout", p.holdout},
                 {"cap_seconds", p.cap_seconds},
                 {"seconds", p.seconds},
                 {"rungs", rungs},
                 {"kept", p.kept},
                 {"met", p.met},
                 {"next", p.next}};
  return j.dump(1);
}

// The fields every mode shares, from the calibration whose artifacts were written.
void SetFromCalibration(pipelines::CalibrateResult r, CalibrateReport* report) {
  SetCheck(r.check, report);
  report->plan = api::MakePublicPlan(std::move(r.plan));
  report->written = std::move(r.written);
  report->warnings = std::move(r.warnings);
  report->notes = std::move(r.notes);
  report->summary = std::move(r.summary);
  report->samples = r.samples;
  report->seconds = r.seconds;
  report->peak_rss_bytes = r.peak_rss_bytes;
  api::SetRank(r.rank, report);
}

std::string WroteLines(const std::vector<std::string>& files) {
  std::string s;
  for (const std::string& f : files) s += "wrote " + f + "\n";
  return s;
}

Result<CalibrateReport> CalibrateWithBudget(const CalibrateOptions& o,
                                            pipelines::CalibrateOptions c) {
  pipelines::CalibrateBudgetOptions b;
  b.calibrate = std::move(c);
  b.budget = *o.budget;
  b.holdout = o.holdout;
  b.holdout_samples = o.holdout_samples;
  b.metric = o.metric;
  QK_ASSIGN_OR_RETURN(pipelines::CalibrateBudgetResult r, pipelines::CalibrateWithinBudget(b));
  CalibrateReport report;
  // FormatCalibrateBudget prints the search's files; the calibration's that it kept follow.
  report.text = pipelines::FormatCalibrateBudget(r) + WroteLines(r.calibration.written);
  report.within_budget = r.fallback.search.within_budget;
  // The result is the repaired calibration: fallback's plan (the float layers it kept), both
  // runs' files, the budget summary; the rest (check, warnings, samples, time) is calibrate's.
  std::string summary = pipelines::FormatCalibrateBudget(r, /*with_written=*/false);
  pipelines::CalibrateResult repaired = std::move(r.calibration);
  repaired.plan = std::move(r.fallback.plan);
  repaired.written.insert(repaired.written.end(), r.fallback.written.begin(),
                          r.fallback.written.end());
  repaired.summary = std::move(summary);
  SetFromCalibration(std::move(repaired), &report);
  report.rank_line.clear();
  return report;
}

Result<CalibrateReport> CalibrateComparing(const CalibrateOptions& o,
                                           const CalibrateRequest& request) {
  pipelines::CompareMethodsOptions cm;
  cm.calibrate = request.calibrate;
  cm.holdout = o.holdout;
  cm.holdout_samples = o.holdout_samples;
  // The zoo's own validation split is the natural held-out data for its calibration split. Its
  // 5000 samples are all used only when all of --data is: a quick --samples N run evaluates each
  // candidate on N of them (at least the check's minimum), not 5000 (84 s for --samples 64).
  if (cm.holdout.empty() && cm.calibrate.data.rfind("fashion-mnist", 0) == 0) {
    cm.holdout = "fashion-mnist:val";
    if (cm.holdout_samples == 0 && cm.calibrate.samples > 0) {
      cm.holdout_samples = std::max(cm.calibrate.samples, kCheckMinSamples);
    }
  }
  cm.metric = o.metric;
  cm.per_tensor =
      request.auto_method;  // auto refines per tensor; compare_methods is the per-model table
  QK_ASSIGN_OR_RETURN(pipelines::CompareMethodsResult r, pipelines::CompareMethods(cm));
  CalibrateReport report;
  report.text = pipelines::FormatCompareMethods(r) + r.best_result.summary +
                WroteLines(r.best_result.written);
  report.json = pipelines::CompareMethodsJson(r);
  SetFromCalibration(std::move(r.best_result), &report);
  report.rank_line.clear();
  return report;
}

}  // namespace

Status CheckCalibrateOptions(const CalibrateOptions& options) {
  return ToRequest(options).status();
}

Result<CalibrateReport> Calibrate(const CalibrateOptions& options) {
  QK_ASSIGN_OR_RETURN(CalibrateRequest request, ToRequest(options));
  switch (request.mode) {
    case CalibrateMode::kBudget:
      return CalibrateWithBudget(options, std::move(request.calibrate));
    case CalibrateMode::kCompare:
      return CalibrateComparing(options, request);
    case CalibrateMode::kPlain:
      break;
  }
  QK_ASSIGN_OR_RETURN(pipelines::CalibrateResult r,
                      pipelines::CalibrateRepaired(request.calibrate, request.repair));
  CalibrateReport report;
  // Rank 0 (or the only process) wrote everything; other ranks report their shard.
  if (r.rank.rank == 0) report.text = r.summary + WroteLines(r.written);
  SetRepair(r.repair, &report);
  SetFromCalibration(std::move(r), &report);
  if (report.rank == 0) report.json = PlainJson(report);
  return report;
}

std::string DescribePtqStages() {
  std::string s;
  for (const pipelines::PtqStageInfo& st : pipelines::PtqStages()) {
    s += std::string("\n  ") + st.name + ": " + st.help;
    for (const pipelines::PtqParam& p : st.params) {
      // A default below the range means "chosen by the stage" (smoothquant's alpha).
      const std::string value =
          p.default_value < p.min ? "auto" : fmt::format("{:g}", p.default_value);
      s += fmt::format("\n    {}={} in [{:g}, {:g}]: {}", p.name, value, p.min, p.max, p.help);
    }
  }
  return s;
}

}  // namespace quantkit
