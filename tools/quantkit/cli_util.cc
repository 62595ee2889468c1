#include "cli_util.h"

#include <cstdio>

#include "analysis/simulate.h"
#include "common/check.h"

namespace quantkit::cli {

int Report(const Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "quantkit: %s\n", status.message().c_str());
  return ExitCodeFor(status.code());
}

void AddImageOptions(CLI::App* cmd, ImageArgs* a) {
  const char* group = "Image folders (docs/data-sources.md)";
  cmd->add_option("--resize", a->resize, "resize: N = shorter side to N (torchvision Resize(N)), HxW = exact")
      ->group(group);
  cmd->add_option("--center-crop", a->crop, "center crop after the resize: N or HxW")->group(group);
  cmd->add_option("--color", a->color, "rgb | bgr | gray (default: gray for 1-channel inputs, else rgb)")
      ->group(group);
  cmd->add_option("--layout", a->layout, "nchw | nhwc (default: from the model input)")->group(group);
  cmd->add_option("--scale", a->scale, "multiply pixels 0..255 by this first (default 1/255)")->group(group);
  cmd->add_option("--mean", a->mean, "per-channel mean subtracted after scaling, e.g. 0.485,0.456,0.406")
      ->group(group);
  cmd->add_option("--std", a->std, "per-channel std divided by after the mean, e.g. 0.229,0.224,0.225")
      ->group(group);
}

Result<data::ImageOptions> ToImageOptions(const ImageArgs& a) {
  data::ImageOptions o;
  if (!a.resize.empty()) {
    QK_RETURN_IF_ERROR(data::SetResize(a.resize, &o));
  }
  if (!a.crop.empty()) {
    QK_RETURN_IF_ERROR(data::SetCrop(a.crop, &o));
  }
  if (!a.color.empty()) {
    QK_RETURN_IF_ERROR(data::SetColor(a.color, &o));
  }
  if (!a.layout.empty()) {
    QK_RETURN_IF_ERROR(data::SetLayout(a.layout, &o));
  }
  if (a.scale != 0) o.scale = a.scale;
  if (!a.mean.empty()) {
    QK_ASSIGN_OR_RETURN(o.mean, data::ParseFloatList(a.mean, "--mean"));
  }
  if (!a.std.empty()) {
    QK_ASSIGN_OR_RETURN(o.std, data::ParseFloatList(a.std, "--std"));
  }
  return o;
}

void AddPlanEvalOptions(CLI::App* cmd, PlanEvalArgs* a, const std::string& data_help) {
  cmd->add_option("model", a->eval.model, "FP32 ONNX model")->required();
  cmd->add_option("--plan", a->plan, "plan .json, TensorRT cache, ranges .txt or Q/DQ .onnx")->required();
  cmd->add_option("--data", a->eval.data, data_help)->required();
  cmd->add_option("--samples", a->eval.samples, "first N samples (0: all)")->capture_default_str();
  cmd->add_option("--batch-size", a->eval.batch_size, "samples per run")->capture_default_str();
  cmd->add_option("--placement", a->placement, "auto, tensorrt or plan")->capture_default_str();
}

Result<pipelines::PlanEvaluation> OpenPlanEvaluation(const PlanEvalArgs& args) {
  QK_ASSIGN_OR_RETURN(pipelines::PlanEvaluation r, pipelines::OpenPlanEvaluation(args.eval, args.plan, args.placement));
  for (const std::string& w : r.warnings) std::fprintf(stderr, "quantkit: warning: %s\n", w.c_str());
  return r;
}

}  // namespace quantkit::cli
