#include "pipelines/calibrate/repair.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "analysis/metrics.h"
#include "analysis/plan_eval.h"
#include "common/artifact_set.h"
#include "common/check.h"
#include "common/file_util.h"
#include "distributed/communicator.h"
#include "distributed/launch.h"
#include "pipelines/calibrate/check.h"
#include "pipelines/calibrate/compare_methods.h"
#include "pipelines/calibrate/holdout.h"
#include "pipelines/evaluate/fallback.h"

namespace quantkit::pipelines {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A plan the ladder tried, with what made it.
struct Candidate {
  ReadyPlan ready;
  MethodChoice methods;
  std::vector<PtqStageSpec> stages;  // those that made ready.plan's weights
};

// The check's own figure, larger is better; a NaN (non-finite outputs) is the worst.
double Figure(const CheckResult& c) {
  const double v = c.class_output ? c.agreement : -c.rel_mse;
  return std::isnan(v) ? -std::numeric_limits<double>::infinity() : v;
}

// Meeting the target first, then the check's figure, then rel MSE.
bool Better(const CheckResult& a, const CheckResult& b) {
  const bool pa = a.warning.empty(), pb = b.warning.empty();
  if (pa != pb) return pa;
  if (Figure(a) != Figure(b)) return Figure(a) > Figure(b);
  return a.rel_mse < b.rel_mse;
}

// Why the ladder cannot run on these options ("" when it can). `quiet`: the reason needs no note
// (nothing is written or checked, or there is no INT8 part to repair).
std::string WhyNoLadder(const CalibrateOptions& options, bool* quiet) {
  *quiet = true;
  if (!options.int8) return "--int8 off";
  if (options.check.samples == 0) return "no check";
  if (options.output_dir.empty() && !options.artifacts) return "no output";
  *quiet = false;
  if (!options.from_stats.empty() || options.statistics) {
    return "the repair ladder fits and judges plans on the calibration data, and statistics alone do not hold it "
           "(calibrate with --data to repair); with --holdout SPEC the plan written is checked";
  }
  return "";
}

// The held-out samples of the ladder and the check (rules in calibrate_repair.h): eval's data,
// `c`'s samples, the check's origin fields in `origin`, and a note on how they were taken.
// `too_small`: why there are none (the data is too small to split); the ladder then does not run.
Status ChooseHeldOut(CalibrateOptions* c, analysis::PlanEvalOptions* eval, CheckResult* origin,
                     std::vector<std::string>* notes, std::string* too_small) {
  QK_ASSIGN_OR_RETURN(CalibrationDataSize size, MeasureCalibrationData(*c));
  const int64_t calibrated = c->samples > 0 ? std::min(c->samples, size.samples) : size.samples;
  const bool fashion_mnist =
      c->data.rfind("fashion-mnist", 0) == 0 && c->data != "fashion-mnist:val";
  if (!c->check.holdout.empty() || size.samples > calibrated) {
    // --holdout, or the samples after --samples: the plain check's own choice.
    QK_RETURN_IF_ERROR(
        ChooseCheckData(c->check, {c->model, c->data, calibrated, size.samples}, eval, origin));
    if (eval->data == c->data) eval->image = c->image;
    return Status::Ok();
  }
  const int64_t n = CheckSampleCount(c->check.samples, calibrated);
  origin->origin = "held-out";
  if (fashion_mnist) {
    eval->data = "fashion-mnist:val";
    eval->samples = n;
    return Status::Ok();
  }
  if (size.samples < kRepairMinSplitSamples) {
    // A repair chosen on the samples it was calibrated on would be verified by nothing.
    *too_small = fmt::format(
        "{} holds {} samples, too few to hold any out (at least {}): the plan is only checked, "
        "in-sample; give --holdout SPEC to repair it",
        size.description, size.samples, kRepairMinSplitSamples);
    return Status::Ok();
  }
  QK_RETURN_IF_ERROR(HoldOutTail(size, n, c, eval));
  origin->first_sample = eval->first_sample;
  notes->push_back(
      fmt::format("the calibration uses the first {} of the {} samples of {}; the last {} are held "
                  "out to judge the plan (--holdout SPEC to give your own, --repair off to "
                  "calibrate on all of them)",
                  c->samples, size.samples, size.description, eval->samples));
  return Status::Ok();
}

class Ladder {
 public:
  // `max_cap`: the most the cap may be (under a launch, half of --dist-timeout: the other ranks
  // wait for rank 0's outcome within it).
  Ladder(const CalibrateOptions& c, const PreparedCalibration& prepared,
         const analysis::PlanEvaluator& evaluator, const CheckResult& origin,
         Clock::time_point start, double max_cap)
      : c_(c),
        prepared_(prepared),
        evaluator_(evaluator),
        origin_(origin),
        start_(start),
        max_cap_(max_cap) {
    plan_path_ = (std::filesystem::path(c.output_dir) / "plan.json").string();
  }

  Status Run(const RepairOptions& options, RepairReport* report);
  // The candidate written: the best one (rungs skipped have none, so its index is not the rung's).
  Candidate& kept() { return candidates_[static_cast<size_t>(best_)]; }

 private:
  // The plan of `methods` with `stages` run on it, judged; appended as a rung.
  Status Try(const std::string& name, const std::string& detail, const MethodChoice& methods,
             const std::vector<PtqStageSpec>& stages, Clock::time_point rung_start);
  Status Judge(const std::string& name, std::string detail, Candidate candidate,
               Clock::time_point rung_start);
  Status TryAuto();
  Status TryFallback();
  void Skip(const std::string& name, const std::string& why) {
    report_->rungs.push_back({name, "", why});
  }
  const Candidate& best() const { return candidates_[static_cast<size_t>(best_)]; }
  // Judge() sets every candidate's check.
  const CheckResult& check_of(int i) const {
    return *candidates_[static_cast<size_t>(i)].ready.check;
  }
  std::string MetricName() const { return evaluator_.class_output() ? "agreement" : "rel_mse"; }

  const CalibrateOptions& c_;
  const PreparedCalibration& prepared_;
  const analysis::PlanEvaluator& evaluator_;
  const CheckResult& origin_;
  Clock::time_point start_;
  double max_cap_;
  std::string plan_path_;
  RepairReport* report_ = nullptr;
  double cap_ = 0;
  bool cut_ = false;  // the cap left a rung out or stopped the fallback search
  std::vector<Candidate> candidates_;
  std::vector<int> rung_of_;  // candidates_[i] is report_->rungs[rung_of_[i]]
  int best_ = 0;
};

Status Ladder::Judge(const std::string& name, std::string detail, Candidate candidate,
                     Clock::time_point rung_start) {
  CheckResult check = origin_;
  QK_RETURN_IF_ERROR(
      JudgePlan(evaluator_, candidate.ready.plan, plan_path_, /*own_evaluator=*/false, &check));
  RepairRung rung{name, std::move(detail), ""};
  rung.passes = check.warning.empty();
  rung.agreement = check.agreement;
  rung.rel_mse = check.rel_mse;
  rung.seconds = SecondsSince(rung_start);
  report_->rungs.push_back(rung);
  candidate.ready.check = std::move(check);
  candidates_.push_back(std::move(candidate));
  rung_of_.push_back(static_cast<int>(report_->rungs.size()) - 1);
  const int i = static_cast<int>(candidates_.size()) - 1;
  if (i == 0 || Better(check_of(i), check_of(best_))) best_ = i;
  return Status::Ok();
}

Status Ladder::Try(const std::string& name, const std::string& detail, const MethodChoice& methods,
                   const std::vector<PtqStageSpec>& stages, Clock::time_point rung_start) {
  QK_ASSIGN_OR_RETURN(BuiltPlan built,
                      BuildPlan(prepared_.statistics, prepared_.model, prepared_.sites, methods));
  Candidate candidate{
      ReadyPlan{std::move(built.plan), {}, std::move(built.warnings), std::nullopt, ""}, methods,
      stages};
  if (!stages.empty()) {
    PtqOptions ptq = c_.ptq;
    ptq.stages = stages;
    QK_ASSIGN_OR_RETURN(candidate.ready.ptq, RunPtqStages(prepared_.model, prepared_.sites,
                                                          {c_.data, c_.image, c_.samples, methods},
                                                          ptq, &candidate.ready.plan));
  }
  return Judge(name, detail, std::move(candidate), rung_start);
}

Status Ladder::TryAuto() {
  const auto rung_start = Clock::now();
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::Metric> metric, analysis::MakeMetric(MetricName()));
  QK_ASSIGN_OR_RETURN(analysis::TrialResult fp32, evaluator_.EvaluateFp32({metric.get()}));
  QK_ASSIGN_OR_RETURN(
      MethodSearch search,
      SearchMethods(prepared_, evaluator_, metric.get(), fp32.metrics.at(metric->name()),
                    quant::AllMethods(), {c_.method, c_.method_overrides}, /*per_tensor=*/true,
                    // Rungs 1-3 have the first half of the cap (see Run).
                    [this] { return SecondsSince(start_) > cap_ / 2; }));
  std::string detail = search.scores[search.best].method;
  // A tensor the greedy pass changed twice is named once, with its last method.
  std::map<std::string, std::string> changed;
  for (const TensorMethodChange& ch : search.per_tensor.changes) changed[ch.tensor] = ch.to;
  if (!changed.empty()) {
    detail += fmt::format(", {} tensor(s) on another method:", changed.size());
    for (const auto& [tensor, method] : changed) detail += fmt::format(" {}->{}", tensor, method);
  }
  if (search.stopped) {
    detail += " (the search was cut by the time cap)";
    cut_ = true;
  }
  return Try("auto", detail, search.choice, c_.ptq.stages, rung_start);
}

Status Ladder::TryFallback() {
  const auto rung_start = Clock::now();
  const bool agreement = evaluator_.class_output();
  QK_ASSIGN_OR_RETURN(std::unique_ptr<analysis::Metric> metric, analysis::MakeMetric(MetricName()));
  FallbackOptions fallback;
  // The check's thresholds in the search's units: agreement points, or the ratio itself.
  fallback.budget = agreement ? 100.0 * (1.0 - kCheckMinAgreement) : kCheckMaxRelMse;
  fallback.float_precision = quant::FloatDTypeName(c_.floats.dtype);
  fallback.weight_storage = c_.weight_storage;
  fallback.progress = c_.progress;
  fallback.out_of_time = [this] { return SecondsSince(start_) > cap_; };
  const Candidate& from = best();
  QK_ASSIGN_OR_RETURN(FallbackResult searched,
                      RunFallback(evaluator_, from.ready.plan, metric.get(), fallback));
  std::string detail = fmt::format("{} layer(s) in float", searched.plan.float_nodes.size());
  std::string sep = ": ";
  for (const auto& [node, reason] : searched.plan.float_nodes) {
    detail += sep + node;
    sep = " ";
  }
  if (searched.search.stopped) {
    detail += " (the search was cut by the time cap)";
    cut_ = true;
  }
  // layer_precisions.txt only when layers are kept in float (TensorRT <= 10 reads it).
  std::string precisions =
      searched.plan.float_nodes.empty() ? "" : std::move(searched.layer_precisions);
  Candidate candidate{ReadyPlan{std::move(searched.plan), from.ready.ptq, from.ready.warnings,
                                std::nullopt, std::move(precisions)},
                      from.methods, from.stages};
  return Judge("fallback", detail, std::move(candidate), rung_start);
}

Status Ladder::Run(const RepairOptions& options, RepairReport* report) {
  report_ = report;
  report->ran = true;
  // The metric, and why (analysis::DefaultMetricName's rule and IsNormalisedEmbedding).
  const std::string why = evaluator_.class_output() ? "a [batch, classes] output"
                          : analysis::IsNormalisedEmbedding(*evaluator_.float_model().graph)
                              ? "a normalised embedding, whose argmax means nothing"
                              : "not a class vector";
  report->target =
      evaluator_.class_output()
          ? fmt::format("top-1 agreement with FP32 >= {:.0f}% ({})", 100 * kCheckMinAgreement, why)
          : fmt::format("output rel MSE vs FP32 <= {:g} ({})", kCheckMaxRelMse, why);
  report->holdout = fmt::format("{} {} samples of {}", evaluator_.num_samples(), origin_.origin,
                                evaluator_.data_description());
  // Rung 0's time is the calibration's: collection included.
  QK_RETURN_IF_ERROR(Try("as asked", quant::MethodLabel(c_.method),
                         {c_.method, c_.method_overrides}, c_.ptq.stages, start_));
  if (check_of(0).fp32_non_finite) {
    // Bad data, not a bad plan: no candidate can be judged against a NaN reference. The check's
    // warning says so, as under --repair off.
    report->ran = false;
    report->not_run =
        "the FP32 model's own output is not finite on the held-out samples: there is nothing to "
        "repair against (clean the data)";
    return Status::Ok();
  }
  cap_ = options.time_cap_seconds > 0
             ? options.time_cap_seconds
             : std::max(kRepairMinSeconds, kRepairTimeFactor * SecondsSince(start_));
  cap_ = std::min(cap_, max_cap_);
  report->cap_seconds = cap_;
  auto done = [&] { return check_of(best_).warning.empty(); };
  // Rungs 1-3 leave the fallback the second half of the cap.
  auto early_time = [&](const std::string& name) {
    if (SecondsSince(start_) < cap_ / 2) return true;
    Skip(name, fmt::format("not started: {:.0f} s of the {:.0f} s cap spent", SecondsSince(start_),
                           cap_));
    cut_ = true;
    return false;
  };
  if (!done() && early_time("auto")) QK_RETURN_IF_ERROR(TryAuto());
  const std::string stages_name = "smoothquant,bias-correction";
  if (!done()) {
    if (!c_.ptq.stages.empty()) {
      Skip(stages_name, "--ptq given: its stages ran at every rung");
    } else if (early_time(stages_name)) {
      QK_ASSIGN_OR_RETURN(std::vector<PtqStageSpec> stages, ParsePtqStages(stages_name));
      QK_RETURN_IF_ERROR(Try(stages_name,
                             quant::MethodLabel(best().methods.method) + " + " + stages_name,
                             best().methods, stages, Clock::now()));
    }
  }
  if (!done()) {
    std::vector<PtqStageSpec> stages = best().stages;
    const bool has_weight_stage =
        std::any_of(stages.begin(), stages.end(), [](const PtqStageSpec& s) {
          return s.kind == PtqStageKind::kSeqMse || s.kind == PtqStageKind::kAdaRound;
        });
    if (has_weight_stage) {
      Skip("seqmse", "the best plan's stages fit the weights already");
    } else if (early_time("seqmse")) {
      QK_ASSIGN_OR_RETURN(std::vector<PtqStageSpec> seqmse, ParsePtqStages("seqmse"));
      // Before bias correction, which corrects the output shift of the weights as they end up.
      auto at = std::find_if(stages.begin(), stages.end(), [](const PtqStageSpec& s) {
        return s.kind == PtqStageKind::kBiasCorrection;
      });
      stages.insert(at, seqmse.front());
      QK_RETURN_IF_ERROR(
          Try("seqmse", quant::MethodLabel(best().methods.method) + " + " + PtqStagesText(stages),
              best().methods, stages, Clock::now()));
    }
  }
  if (!done()) {
    if (SecondsSince(start_) < cap_) {
      QK_RETURN_IF_ERROR(TryFallback());
    } else {
      Skip("fallback", fmt::format("not started: the {:.0f} s cap is spent", cap_));
      cut_ = true;
    }
  }
  report->kept = rung_of_[static_cast<size_t>(best_)];
  report->met = report->rungs[static_cast<size_t>(report->kept)].passes;
  report->seconds = SecondsSince(start_);
  if (!report->met) {
    report->next =
        cut_
            ? fmt::format("give the ladder more time: --repair-time {:.0f}", 4 * cap_)
            : fmt::format(
                  "label-free QAT from this calibration: quantkit qat {} --data {} -o DIR (docs/qat.md); "
                  "or see which tensors cost it (--layers float: the float part's): quantkit "
                  "analyze {} --plan {} --data {}",
                  c_.model, c_.data, c_.model, plan_path_, evaluator_.options().data);
  }
  return Status::Ok();
}

}  // namespace

Status CheckRepairOptions(const RepairOptions& repair) {
  QK_RETURN_IF_NOT(std::isfinite(repair.time_cap_seconds) && repair.time_cap_seconds >= 0 &&
                       repair.time_cap_seconds <= kMaxRepairSeconds,
                   StatusCode::kInvalidArgument,
                   "--repair-time must be in [0, {:g}] seconds (0: automatic), got {}",
                   kMaxRepairSeconds, repair.time_cap_seconds);
  return Status::Ok();
}

std::string FormatRepair(const RepairReport& r) {
  if (!r.ran) return r.not_run.empty() ? "" : "repair: not run: " + r.not_run + "\n";
  std::string s = fmt::format("repair: target {} on the {} ({:.1f} s of a {:.0f} s cap)\n",
                              r.target, r.holdout, r.seconds, r.cap_seconds);
  for (size_t i = 0; i < r.rungs.size(); ++i) {
    const RepairRung& g = r.rungs[i];
    if (!g.skipped.empty()) {
      s += fmt::format("  {}. {:<28} skipped: {}\n", i, g.name, g.skipped);
      continue;
    }
    const std::string figure =
        std::isnan(g.agreement)
            ? fmt::format("rel MSE {:.3g}", g.rel_mse)
            : fmt::format("agreement {:.1f}%, rel MSE {:.3g}", 100 * g.agreement, g.rel_mse);
    s += fmt::format("  {}. {:<28} {} ({:.1f} s){}{}\n", i, g.name, figure, g.seconds,
                     g.passes ? " meets the target" : "",
                     static_cast<int>(i) == r.kept ? "  <- written" : "");
    if (!g.detail.empty()) s += fmt::format("     {}\n", g.detail);
  }
  if (r.kept >= 0) {
    const RepairRung& k = r.rungs[static_cast<size_t>(r.kept)];
    s +=
        r.met
            ? fmt::format("repair: written: rung {} ({}), the first to meet the target\n", r.kept,
                          k.name)
            : fmt::format(
                  "repair: the target was not met; written: rung {} ({}), the best tried. Next: {}\n",
                  r.kept, k.name, r.next);
  }
  return s;
}

Result<CalibrateResult> CalibrateRepaired(const CalibrateOptions& options,
                                          const RepairOptions& repair) {
  QK_RETURN_IF_ERROR(CheckRepairOptions(repair));
  bool quiet = true;
  const std::string why_not = repair.enabled ? WhyNoLadder(options, &quiet) : "";
  if (!repair.enabled || !why_not.empty()) {
    CalibrateOptions plain = options;
    RepairReport note;
    if (!quiet) {
      note.not_run = why_not;
      plain.repair = &note;
    }
    QK_ASSIGN_OR_RETURN(CalibrateResult r, Calibrate(plain));
    r.repair = note;
    return r;
  }
  // Bad options, then --distributed outside a launch (or a broken launch environment), before any
  // data is read, as a plain calibration checks them.
  QK_RETURN_IF_ERROR(CheckCalibrateSource(options));
  QK_ASSIGN_OR_RETURN(std::optional<distributed::DistributedEnv> launch,
                      distributed::CheckLaunch(options.distributed));
  const bool launched = launch && launch->world_size > 1;
  const double max_cap =
      launched ? 0.5 * std::chrono::duration<double>(options.distributed.timeout).count()
               : kMaxRepairSeconds;
  const auto start = Clock::now();
  CalibrateOptions c = options;
  analysis::PlanEvalOptions eval;
  eval.model = c.model;
  eval.batch_size = c.batch_size;
  eval.simulation.placement = c.placement;
  eval.simulation.mode = analysis::PlacementMode::kTensorRT;
  // -o is locked (by rank 0) before anything is read; the written rung's files are staged into the
  // set and committed last.
  std::unique_ptr<ArtifactSet> out;
  if (!c.artifacts && (!launch || launch->rank == 0)) {
    QK_ASSIGN_OR_RETURN(out, ArtifactSet::Open(c.output_dir, CalibrationArtifactNames(c)));
    c.artifacts = out.get();
  }
  // The model is read once for the held-out split, the ladder's evaluator and the calibration (a
  // 2.35 GiB ViT-H/14 was read three times, docs/performance.md section 14).
  QK_ASSIGN_OR_RETURN(const LoadedModel loaded, LoadFloatModel(c.model));
  c.loaded_model = &loaded;
  eval.loaded = loaded.model;
  CheckResult origin;
  std::string too_small;
  QK_RETURN_IF_ERROR(ChooseHeldOut(&c, &eval, &origin, &c.notes, &too_small));
  RepairReport report;
  report.not_run = too_small;
  c.repair = &report;
  std::unique_ptr<analysis::PlanEvaluator> evaluator;
  if (too_small.empty()) {
    // Rank 0 judges: the held-out samples are read (and checked against the model) before the
    // calibration pass; the other ranks collect their shards meanwhile and wait for its outcome.
    // Under a launch a failure here waits for the pass, so that every rank learns of it at the
    // write (instead of waiting for a rank 0 that left).
    Status evaluator_status = Status::Ok();
    if (c.artifacts) {
      Result<std::unique_ptr<analysis::PlanEvaluator>> created =
          analysis::PlanEvaluator::Create(eval);
      if (created.ok()) {
        evaluator = std::move(*created);
        c.check_evaluator = evaluator.get();
        c.check_origin = origin.origin;
      } else if (!launched) {
        return created.status();
      } else {
        evaluator_status = created.status();
      }
    }
    c.choose_plan = [&,
                     evaluator_status](const PreparedCalibration& prepared) -> Result<ReadyPlan> {
      QK_RETURN_IF_ERROR(evaluator_status);
      QK_RETURN_IF_NOT(evaluator, StatusCode::kInternal, "the repair ladder runs on rank 0 only");
      Ladder ladder(c, prepared, *evaluator, origin, start, max_cap);
      QK_RETURN_IF_ERROR(ladder.Run(repair, &report));
      return std::move(ladder.kept().ready);
    };
  }
  // Too few samples to hold any out: the plain calibration and its in-sample check, with the note.
  QK_ASSIGN_OR_RETURN(CalibrateResult result, Calibrate(c));
  result.repair = report;
  if (out) {
    QK_ASSIGN_OR_RETURN(std::vector<std::string> written, out->Commit());
    result.written.insert(result.written.end(), written.begin(), written.end());
  }
  return result;
}

}  // namespace quantkit::pipelines
