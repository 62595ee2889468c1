// `quantkit convert IN OUT`: moves quantization parameters between every pair of formats through
// the QuantPlan hub. The kind of IN and OUT is taken from the file extension:
//   .onnx                 a Q/DQ model (IN) or a model to write (OUT)
//   .cache .calib .table  TensorRT calibration cache
//   .json                 quantkit plan JSON (ranges with provenance)
//   .txt .ranges          sampleINT8API dynamic-range text
// Conversions:
//   Q/DQ ONNX -> cache | json | txt       extract (scales propagated through shape ops)
//   Q/DQ ONNX -> ONNX                     strip to the float model, and write <stem>.cache,
//                                         <stem>.plan.json, <stem>.ranges.txt beside it
//   cache | json | txt -> cache | json | txt
//   cache | json | txt + --model FLOAT.onnx -> Q/DQ ONNX (TensorRT placement, weights per channel)
//   QOperator ONNX (QLinearConv, QGemm, ConvInteger, ... as onnxruntime writes them) -> any of the
//                                         above: rewritten to Q/DQ first (passes/qop_to_qdq.h),
//                                         then handled as a Q/DQ model
//   ONNX -> ONNX with qdq_output          a TensorRT Q/DQ model (symmetric int8, the extracted
//   scales,
//                                         placed by `placement` or, with placement_from_plan,
//                                         where the source quantized) instead of the float model
// Asymmetric sources (uint8, non-zero zero points) become symmetric int8 by the rule of
// quant/symmetric_conversion.h; ConvertResult::costs says per tensor what that costs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/image_options.h"
#include "formats/trt_cache.h"
#include "ir/graph.h"
#include "passes/float_precision.h"
#include "passes/insert_qdq.h"
#include "passes/qdq_placement.h"
#include "quant/plan.h"
#include "quant/symmetric_conversion.h"
#include "quantkit/status.h"

namespace quantkit::pipelines {

struct ConvertOptions {
  std::string input;
  std::string output;
  std::string model;  // float model for plan -> Q/DQ ONNX
  formats::TrtCacheWriteOptions cache;
  passes::PlacementOptions placement;
  // plan -> Q/DQ ONNX: false = TensorRT's recipe (qdq_placement.h); true = exactly the tensors
  // the plan extracted from a Q/DQ model (reproduces that model's fake quantization).
  bool placement_from_plan = false;
  std::string float_precision = "fp16";  // for the --layerPrecisions string
  // ONNX -> ONNX: write the Q/DQ model TensorRT builds rather than the float model.
  bool qdq_output = false;
  // The float part of a written Q/DQ model (--float-dtype, --cast-io, --keep-fp32); nullopt: the
  // float precision a plan.json records, else passes::FloatOptions' defaults.
  std::optional<passes::FloatOptions> floats;
  passes::WeightStorage weight_storage = passes::WeightStorage::kInt8;
  // Data (--data) for a written Q/DQ model: one range-only pass of the float model first (which
  // tensors the float dtype cannot hold), and afterwards the accuracy of the written model against
  // the float model (the migration check of an implicit-INT8 deployment to TensorRT 11).
  std::string data;
  data::ImageOptions image;
  int64_t samples = 0;
  int64_t batch_size = 32;
};

// What converting one tensor's source quantization to symmetric int8 costs (for per-channel
// weights: the channel that loses most).
struct ConversionCost {
  std::string tensor;  // plan key (float tensor name)
  quant::TensorRole role = quant::TensorRole::kActivation;
  std::string source_dtype;  // "uint8" / "int8"
  int32_t zero_point = 0;    // of the worst channel
  int64_t channels = 1;
  quant::SymmetricConversion worst;
};

struct ConvertResult {
  std::vector<std::string> written;          // files written, in order
  std::vector<std::string> messages;         // summary lines (counts, warnings)
  std::string layer_precisions;              // trtexec --layerPrecisions value ("" when none)
  bool integer_ops = false;                  // the input was a QOperator model
  std::vector<ConversionCost> costs;         // tensors whose grid changed, sorted by name
  std::vector<std::string> dynamic_tensors;  // quantized at run time: no static scale
  // With data: the written model against the float model on it.
  struct Accuracy {
    std::string data;
    int64_t samples = 0;
    std::optional<double> fp32_top1, top1;  // with labels
    double argmax_agreement = 0, cosine = 0, sqnr_db = 0;
  };
  std::optional<Accuracy> accuracy;
};

// One line per cost ("conv1_out: uint8 zp 0 [0, 4.2] -> int8 scale ... (x2.008 step, -1.01 bits,
// 50.0% of int8 codes unused; sign bit wasted)").
std::string DescribeCost(const ConversionCost& cost);
// The result as JSON: written, messages, layer_precisions, integer_ops, dynamic_tensors and
// conversion_costs (one object per cost with every field of SymmetricConversion).
std::string ConvertResultJson(const ConvertResult& result);

Result<ConvertResult> Convert(const ConvertOptions& options);

}  // namespace quantkit::pipelines
