#include "cli_util.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cli_distributed.h"
#include "numeric_options.h"
#include "quantkit/runtime.h"

namespace quantkit::cli {

int Report(const Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "quantkit: %s\n", EscapeControl(status.message()).c_str());
  return ExitCodeFor(status.code());
}

namespace {

// Bytes of a UTF-8 sequence cut by a buffer flush, held until the next write completes them (so
// a name split across two writes is not escaped as invalid).
std::string& PendingUtf8() {
  static std::string pending;
  return pending;
}

// How many bytes at the end of `text` start a UTF-8 sequence that the end cuts short.
size_t CutUtf8Tail(std::string_view text) {
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto b = static_cast<unsigned char>(text[text.size() - back]);
    if ((b & 0xc0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

ssize_t WriteRaw(const std::string& out) {
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
  return 0;
}

// fopencookie write callback: escapes and writes to the original stdout descriptor.
ssize_t WriteEscaped(void* /*cookie*/, const char* data, size_t size) {
  std::string text = std::move(PendingUtf8());
  PendingUtf8().clear();
  text.append(data, size);
  const size_t held = CutUtf8Tail(text);
  PendingUtf8() = text.substr(text.size() - held);
  text.resize(text.size() - held);
  std::string out;
  out.reserve(text.size());
  size_t begin = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && (text[i] == '\n' || text[i] == '\t')) {
      out += EscapeControl(std::string_view(text.data() + begin, i - begin));
      out += text[i];
      begin = i + 1;
    } else if (i == text.size()) {
      out += EscapeControl(std::string_view(text.data() + begin, i - begin));
    }
  }
  return WriteRaw(out) < 0 ? -1 : static_cast<ssize_t>(size);
}

// At exit: flush what stdio holds, then what a cut sequence held back (escaped: nothing completes
// it).
void FlushPendingUtf8() {
  std::fflush(stdout);
  if (!PendingUtf8().empty()) WriteRaw(EscapeControl(PendingUtf8()));
  PendingUtf8().clear();
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
  std::atexit(FlushPendingUtf8);
}

namespace {

// A flag: an option that takes no value (CLI11's add_flag sets expected(0)).
bool IsFlag(const CLI::Option& o) { return o.get_expected_max() == 0; }

// Every flag of `app` and its subcommands refuses `--flag=VALUE` (only `--flag`, or `--flag=true`).
void RefuseFlagValues(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (IsFlag(*o)) o->disable_flag_override();
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) RefuseFlagValues(*sub);
}

}  // namespace

int Parse(CLI::App& app, int argc, char** argv) {
  // A numeric option without a declared range is a quantkit bug, caught by every test that runs
  // the binary (exit 70), not an option that silently takes NaN.
  if (const Status rules = CheckNumericOptions(app); !rules.ok()) return Report(rules);
  // A flag takes no value: CLI11 would read --cast-io=2 or --cast-io=yes as true.
  RefuseFlagValues(app);
  // The first word that is neither an option nor the value of one of quantkit's own options
  // (--threads N, --max-tensor-mb N) names the subcommand.
  std::vector<std::string> names, valued;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  for (const CLI::Option* o : app.get_options()) {
    if (IsFlag(*o)) continue;
    for (const std::string& n : o->get_lnames()) valued.push_back("--" + n);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (std::find(valued.begin(), valued.end(), arg) != valued.end()) {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    if (std::find(names.begin(), names.end(), arg) == names.end()) {
      return Report(Status(StatusCode::kInvalidArgument,
                           fmt::format("unknown subcommand '{}'{} (run 'quantkit --help')", arg,
                                       DidYouMean(arg, names, "subcommands"))));
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
    std::string message = e.what();
    // CLI11's words for --flag=VALUE on a flag ("cast-io was given a disallowed flag override").
    const std::string override_text = " was given a disallowed flag override";
    if (const size_t at = message.find(override_text); at != std::string::npos) {
      const std::string name = message.substr(0, at);
      message = fmt::format("--{0} is a flag and takes no value: give --{0} alone", name);
    }
    return Report(Status(StatusCode::kInvalidArgument, message));
  }
  return -1;
}

void AddTensorBudgetOption(CLI::App& app) {
  app.add_option_function<int64_t>(
         "--max-tensor-mb",
         [](int64_t mb) {
           const Status st = SetMaxTensorMb(mb);
           if (!st.ok()) throw CLI::ValidationError("--max-tensor-mb", st.message());
         },
         "the most one tensor of a model run may take, in MiB (default: the larger of 1024 and 64 x the "
         "model's weights and inputs; also QUANTKIT_MAX_TENSOR_MB): a tiny file cannot make gigabytes")
      ->transform(InRange(1, static_cast<double>(kMaxTensorMb)));
}

void AddFloatOptions(CLI::App* cmd, FloatPart* a) {
  const char* group = "Strongly typed output (docs/strongly-typed.md)";
  cmd->add_option(
         "--float-dtype", a->dtype,
         fmt::format(
             "dtype of the non-quantized tensors: fp16 | bf16 | fp32 (default {}; a plan.json's own)",
             kDefaultFloatDTypeName))
      ->group(group);
  cmd->add_flag(
         "--cast-io", a->cast_io,
         "graph inputs and outputs take --float-dtype too (default: kept as the model has them)")
      ->group(group);
  cmd->add_option("--keep-fp32", a->keep_fp32, "node names or op types computed in FP32")
      ->group(group);
  cmd->add_option("--weight-storage", a->weight_storage,
                  "quantized weights stored as int8 (+DequantizeLinear) or float (Q->DQ)")
      ->capture_default_str()
      ->group(group);
}

void AddImageOptions(CLI::App* cmd, ImagePreprocessing* a) {
  const char* group = "Image folders (docs/data-sources.md)";
  cmd->add_option("--resize", a->resize,
                  "resize: N = shorter side to N (torchvision Resize(N)), HxW = exact")
      ->group(group);
  cmd->add_option("--center-crop", a->center_crop, "center crop after the resize: N or HxW")
      ->group(group);
  cmd->add_option("--color", a->color,
                  "rgb | bgr | gray (default: gray for 1-channel inputs, else rgb)")
      ->group(group);
  cmd->add_option("--layout", a->layout, "nchw | nhwc (default: from the model input)")
      ->group(group);
  cmd->add_option("--scale", a->scale, "multiply pixels 0..255 by this first (default 1/255)")
      ->transform(AboveAndAtMost(0, kMaxPixelScale))
      ->group(group);
  cmd->add_option("--mean", a->mean,
                  "per-channel mean subtracted after scaling, e.g. 0.485,0.456,0.406")
      ->group(group);
  cmd->add_option("--std", a->std,
                  "per-channel std divided by after the mean, e.g. 0.229,0.224,0.225")
      ->group(group);
}

void AddPlanEvalOptions(CLI::App* cmd, PlanEvaluationOptions* o, const std::string& data_help) {
  cmd->add_option("model", o->model, "FP32 ONNX model")->required();
  cmd->add_option("--plan", o->plan, "plan .json, TensorRT cache, ranges .txt or Q/DQ .onnx")
      ->required();
  cmd->add_option("--data", o->data, data_help)->required();
  cmd->add_option("--samples", o->samples, "first N samples (0: all)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "samples per run")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--placement", o->placement, "auto, tensorrt or plan")->capture_default_str();
  AddDistributedOptions(cmd, &o->distributed);
}

void PrintWarnings(const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings)
    std::fprintf(stderr, "quantkit: warning: %s\n", EscapeControl(w).c_str());
}

}  // namespace quantkit::cli
