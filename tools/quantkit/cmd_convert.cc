// quantkit convert IN OUT [--model FLOAT.onnx] [--trt-version V] [--calibrator C]
//                  [--layer-precisions] [--float-precision fp16|fp32] [--qdq] [--json]
#include "cli_util.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupConvert(CLI::App& app, RunFn* run) {
  struct Options {
    ConvertOptions convert;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  ConvertOptions& c = opts->convert;
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Convert quantization parameters between formats (kind from the extension):\n"
      "  Q/DQ .onnx -> .cache | .json | .txt      extract scales (e.g. from a QAT export)\n"
      "  Q/DQ .onnx -> .onnx                      strip Q/DQ; also writes "
      "<stem>.cache/.plan.json/.ranges.txt\n"
      "  .cache | .json | .txt -> .cache | .json | .txt\n"
      "  .cache | .json | .txt -> .onnx --model FLOAT.onnx   write a Q/DQ model for TensorRT\n"
      "  QOperator .onnx (QLinearConv, QGemm, ConvInteger, ...) -> any of the above, as a Q/DQ "
      "model;\n"
      "    asymmetric uint8 becomes symmetric int8 (amax = max(|lo|, |hi|)); the cost is printed "
      "per tensor");
  cmd->add_option("input", c.input, "input file")->required();
  cmd->add_option("output", c.output, "output file (written atomically)")->required();
  cmd->add_option("--model", c.model, "float ONNX model (plan -> Q/DQ ONNX)");
  cmd->add_option("--trt-version", c.trt_version,
                  "TensorRT version the cache is for (header TRT-<NV_TENSORRT_VERSION>-...)")
      ->capture_default_str();
  cmd->add_option("--calibrator", c.calibrator,
                  "cache header calibrator: EntropyCalibration2 | MinMaxCalibration")
      ->capture_default_str();
  cmd->add_option("--placement", c.placement,
                  "plan -> Q/DQ ONNX: 'tensorrt' (TensorRT's recipe) or 'plan' (exactly where the "
                  "plan's Q/DQ-extracted scales were: reproduces a QAT model)")
      ->check(CLI::IsMember({"tensorrt", "plan"}))
      ->capture_default_str();
  cmd->add_flag("--qdq", c.qdq_output,
                "ONNX -> ONNX: write the TensorRT Q/DQ model (symmetric int8, the extracted "
                "scales, placed by --placement) instead of the float model");
  AddFloatOptions(cmd, &c.floats);
  AddImageOptions(cmd, &c.image);
  cmd->add_option("--data", c.data,
                  "plan -> Q/DQ ONNX: data to check the float dtype's ranges on and to report the written model's "
                  "accuracy against --model");
  cmd->add_option("--samples", c.samples, "--data: the first N samples (0: all)")->capture_default_str();
  cmd->add_option("--batch-size", c.batch_size, "--data: samples per batch")->capture_default_str();
  cmd->add_flag("--json", opts->json, "print the result (and per-tensor conversion costs) as JSON");
  cmd->add_flag("--layer-precisions", c.layer_precisions,
                "print the trtexec --layerPrecisions string for the layers kept in float");
  cmd->add_option("--float-precision", c.float_precision,
                  "precision named in --layerPrecisions for float layers")
      ->check(CLI::IsMember({"fp16", "fp32"}))
      ->capture_default_str();
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      auto r = Convert(opts->convert);
      if (!r.ok()) return Report(r.status());
      Print(opts->json ? r->json : r->text);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
