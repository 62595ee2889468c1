// quantkit convert IN OUT [--model FLOAT.onnx] [--trt-version V] [--calibrator C]
//                  [--layer-precisions] [--float-precision fp16|fp32] [--qdq] [--json]
#include <cstdio>

#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupConvert(CLI::App& app, RunFn* run) {
  struct Options {
    ConvertOptions convert;
    bool layer_precisions = false;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Convert quantization parameters between formats (kind from the extension):\n"
      "  Q/DQ .onnx -> .cache | .json | .txt      extract scales (e.g. from a QAT export)\n"
      "  Q/DQ .onnx -> .onnx                      strip Q/DQ; also writes <stem>.cache/.plan.json/.ranges.txt\n"
      "  .cache | .json | .txt -> .cache | .json | .txt\n"
      "  .cache | .json | .txt -> .onnx --model FLOAT.onnx   write a Q/DQ model for TensorRT\n"
      "  QOperator .onnx (QLinearConv, QGemm, ConvInteger, ...) -> any of the above, as a Q/DQ model;\n"
      "    asymmetric uint8 becomes symmetric int8 (amax = max(|lo|, |hi|)); the cost is printed per tensor");
  cmd->add_option("input", opts->convert.input, "input file")->required();
  cmd->add_option("output", opts->convert.output, "output file (written atomically)")->required();
  cmd->add_option("--model", opts->convert.model, "float ONNX model (plan -> Q/DQ ONNX)");
  cmd->add_option("--trt-version", opts->convert.cache.trt_version,
                  "TensorRT version the cache is for (header TRT-<NV_TENSORRT_VERSION>-...)")
      ->capture_default_str();
  cmd->add_option("--calibrator", opts->convert.cache.calibrator,
                  "cache header calibrator: EntropyCalibration2 | MinMaxCalibration")
      ->capture_default_str();
  cmd->add_option("--placement", opts->convert.placement,
                  "plan -> Q/DQ ONNX: 'tensorrt' (TensorRT's recipe) or 'plan' (exactly where the "
                  "plan's Q/DQ-extracted scales were: reproduces a QAT model)")
      ->check(CLI::IsMember({"tensorrt", "plan"}))
      ->capture_default_str();
  cmd->add_flag("--qdq", opts->convert.qdq_output,
                "ONNX -> ONNX: write the TensorRT Q/DQ model (symmetric int8, the extracted "
                "scales, placed by --placement) instead of the float model");
  AddFloatOptions(cmd, &opts->convert.floats);
  AddImageOptions(cmd, &opts->convert.image);
  cmd->add_option(
      "--data", opts->convert.data,
      "plan -> Q/DQ ONNX: data to check the float dtype's ranges on and to report the written model's "
      "accuracy against --model");
  cmd->add_option("--samples", opts->convert.samples, "--data: the first N samples (0: all)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--batch-size", opts->convert.batch_size, "--data: samples per batch")
      ->transform(InRange(1, kMaxBatch))
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "print the result (and per-tensor conversion costs) as JSON");
  cmd->add_flag("--layer-precisions", opts->layer_precisions,
                "print the trtexec --layerPrecisions string for the layers kept in float");
  cmd->add_option("--float-precision", opts->convert.float_precision,
                  "precision named in --layerPrecisions for float layers")
      ->check(CLI::IsMember({"fp16", "fp32"}))
      ->capture_default_str();
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      auto result = Convert(opts->convert);
      if (!result.ok()) return Report(result.status());
      if (opts->json) {
        std::printf("%s", result->json.c_str());
        return 0;
      }
      for (const std::string& m : result->messages) std::printf("%s\n", m.c_str());
      for (const std::string& f : result->written) std::printf("wrote %s\n", f.c_str());
      if (opts->layer_precisions && result->layer_precisions.empty()) {
        std::printf("no layer kept in float: no --layerPrecisions needed\n");
      } else if (opts->layer_precisions) {
        std::printf(
            "TensorRT <= 10 (implicit INT8 with the cache): --precisionConstraints=obey --layerPrecisions=%s\n",
            result->layer_precisions.c_str());
      }
      return 0;
    };
  });
}

}  // namespace quantkit::cli
