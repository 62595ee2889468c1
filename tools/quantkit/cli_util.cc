#include "cli_util.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "quantkit/text.h"

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
      return Report(Status(StatusCode::kInvalidArgument, "unknown subcommand '" + arg + "'" +
                                                             DidYouMean(arg, names, "subcommands") +
                                                             " (run 'quantkit --help')"));
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

void AddImageOptions(CLI::App* cmd, ImagePreprocessing* image) {
  const char* group = "Image folders (docs/data-sources.md)";
  cmd->add_option("--resize", image->resize,
                  "resize: N = shorter side to N (torchvision Resize(N)), HxW = exact")
      ->group(group);
  cmd->add_option("--center-crop", image->center_crop, "center crop after the resize: N or HxW")
      ->group(group);
  cmd->add_option("--color", image->color,
                  "rgb | bgr | gray (default: gray for 1-channel inputs, else rgb)")
      ->group(group);
  cmd->add_option("--layout", image->layout, "nchw | nhwc (default: from the model input)")
      ->group(group);
  cmd->add_option_function<double>(
         "--scale", [image](double scale) { image->scale = scale; },
         "multiply pixels 0..255 by this first (default 1/255)")
      ->group(group);
  cmd->add_option("--mean", image->mean,
                  "per-channel mean subtracted after scaling, e.g. 0.485,0.456,0.406")
      ->group(group);
  cmd->add_option("--std", image->std,
                  "per-channel std divided by after the mean, e.g. 0.229,0.224,0.225")
      ->group(group);
}

void AddFloatOptions(CLI::App* cmd, FloatOutputOptions* floats) {
  const char* group = "Strongly typed output (docs/strongly-typed.md)";
  cmd->add_option("--float-dtype", floats->dtype,
                  "dtype of the non-quantized tensors: fp16 | bf16 | fp32 (default " + DefaultFloatDType() +
                      "; a plan.json's own)")
      ->group(group);
  cmd->add_flag("--cast-io", floats->cast_io,
                "graph inputs and outputs take --float-dtype too (default: kept as the model has them)")
      ->group(group);
  cmd->add_option("--keep-fp32", floats->keep_fp32, "node names or op types computed in FP32")->group(group);
  cmd->add_option("--weight-storage", floats->weight_storage,
                  "quantized weights stored as int8 (+DequantizeLinear) or float (Q->DQ)")
      ->capture_default_str()
      ->group(group);
}

void AddDistributedOptions(CLI::App* cmd, DistributedOptions* options) {
  const char* group = "Distributed (torchrun, srun torchrun, PyTorchJob; docs/distributed.md)";
  cmd->add_flag("--distributed", options->required,
                "require a torch.distributed launch (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); "
                "without it a launch is still detected")
      ->group(group);
  cmd->add_option(
         "--dist-timeout", options->timeout_seconds,
         "seconds to wait for the other ranks at the rendezvous and at each step (default 1800)")
      ->check(CLI::Range(1.0, 86400.0))
      ->group(group);
}

void AddPlanEvalOptions(CLI::App* cmd, PlanEvaluationOptions* o, const std::string& data_help) {
  cmd->add_option("model", o->model, "FP32 ONNX model")->required();
  cmd->add_option("--plan", o->plan, "plan .json, TensorRT cache, ranges .txt or Q/DQ .onnx")
      ->required();
  cmd->add_option("--data", o->data, data_help)->required();
  cmd->add_option("--samples", o->samples, "first N samples (0: all)")->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "samples per run")->capture_default_str();
  cmd->add_option("--placement", o->placement, "auto, tensorrt or plan")->capture_default_str();
  AddDistributedOptions(cmd, &o->distributed);
}

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings)
    std::fprintf(stderr, "quantkit: warning: %s\n", EscapeControl(w).c_str());
}

void PrintRankLine(const RankSummary& rank) {
  if (rank.world_size > 1) std::fprintf(stderr, "quantkit: %s\n", rank.line.c_str());
}

void Print(const std::string& text) { std::fputs(text.c_str(), stdout); }

}  // namespace quantkit::cli
