#include "cli_util.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/simulate.h"
#include "cli_distributed.h"
#include "common/check.h"
#include "data/image_options_text.h"

namespace quantkit::cli {

int Report(const Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "quantkit: %s\n", EscapeControl(status.message()).c_str());
  return ExitCodeFor(status.code());
}

namespace {

// fopencookie write callback: escapes and writes to the original stdout descriptor.
ssize_t WriteEscaped(void* /*cookie*/, const char* data, size_t size) {
  std::string out;
  out.reserve(size);
  size_t begin = 0;
  for (size_t i = 0; i <= size; ++i) {
    if (i < size && (data[i] == '\n' || data[i] == '\t')) {
      out += EscapeControl(std::string_view(data + begin, i - begin));
      out += data[i];
      begin = i + 1;
    } else if (i == size) {
      out += EscapeControl(std::string_view(data + begin, i - begin));
    }
  }
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {
    const ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(size);
}

}  // namespace

void EscapeStdout() {
  cookie_io_functions_t io{};
  io.write = WriteEscaped;
  FILE* filtered = fopencookie(nullptr, "w", io);
  if (filtered == nullptr) return;  // keep the plain stdout rather than fail
  std::fflush(stdout);
  setvbuf(filtered, nullptr, ::isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, 1 << 16);
  stdout = filtered;
}

int Parse(CLI::App& app, int argc, char** argv) {
  // The first word that is neither an option nor the value of --threads names the subcommand.
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    if (std::find(names.begin(), names.end(), arg) == names.end()) {
      return Report(MakeStatus(StatusCode::kInvalidArgument, "unknown subcommand '{}'{} (run 'quantkit --help')",
                               arg, DidYouMean(arg, names, "subcommands")));
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Report(Status(StatusCode::kInvalidArgument, e.what()));
  }
  return -1;
}

void AddFloatOptions(CLI::App* cmd, FloatArgs* a) {
  const char* group = "Strongly typed output (docs/strongly-typed.md)";
  cmd->add_option("--float-dtype", a->dtype,
                  fmt::format("dtype of the non-quantized tensors: fp16 | bf16 | fp32 (default {}; a plan.json's own)",
                              quant::FloatDTypeName(passes::kDefaultFloatDType)))
      ->group(group);
  cmd->add_flag("--cast-io", a->cast_io, "graph inputs and outputs take --float-dtype too (default: kept as the model has them)")
      ->group(group);
  cmd->add_option("--keep-fp32", a->keep_fp32, "node names or op types computed in FP32")->group(group);
  cmd->add_option("--weight-storage", a->weight_storage, "quantized weights stored as int8 (+DequantizeLinear) or float (Q->DQ)")
      ->capture_default_str()->group(group);
}

Result<passes::FloatOptions> ToFloatOptions(const FloatArgs& a) {
  passes::FloatOptions f;
  if (!a.dtype.empty()) {
    QK_ASSIGN_OR_RETURN(f.dtype, quant::ParseFloatDType(a.dtype));
  }
  f.cast_io = a.cast_io;
  f.keep_fp32 = a.keep_fp32;
  return f;
}

Result<std::optional<passes::FloatOptions>> ToFloatOverride(const FloatArgs& a) {
  if (a.dtype.empty() && !a.cast_io && a.keep_fp32.empty()) return std::optional<passes::FloatOptions>();
  QK_ASSIGN_OR_RETURN(passes::FloatOptions f, ToFloatOptions(a));
  return std::optional<passes::FloatOptions>(f);
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
  data::ImageOptionsText text{a.resize, a.crop, a.color, a.layout, a.mean, a.std, std::nullopt};
  if (a.scale != 0) text.scale = a.scale;
  return data::ParseImageOptions(text);
}

void AddPlanEvalOptions(CLI::App* cmd, PlanEvalArgs* a, const std::string& data_help) {
  cmd->add_option("model", a->eval.model, "FP32 ONNX model")->required();
  cmd->add_option("--plan", a->plan, "plan .json, TensorRT cache, ranges .txt or Q/DQ .onnx")->required();
  cmd->add_option("--data", a->eval.data, data_help)->required();
  cmd->add_option("--samples", a->eval.samples, "first N samples (0: all)")->capture_default_str();
  cmd->add_option("--batch-size", a->eval.batch_size, "samples per run")->capture_default_str();
  cmd->add_option("--placement", a->placement, "auto, tensorrt or plan")->capture_default_str();
  AddDistributedOptions(cmd, &a->distributed);
}

Result<pipelines::PlanEvaluation> OpenPlanEvaluation(const PlanEvalArgs& args) {
  QK_ASSIGN_OR_RETURN(pipelines::PlanEvaluation r, pipelines::OpenPlanEvaluation(args.eval, args.plan, args.placement, args.distributed));
  for (const std::string& w : r.warnings) std::fprintf(stderr, "quantkit: warning: %s\n", EscapeControl(w).c_str());
  return r;
}

}  // namespace quantkit::cli
