// A summary of a model for `quantkit inspect`: versions, producer, graph inputs/outputs with
// dtypes and (symbolic) shapes, an op-type histogram, and where the weights live.
// Rendering (text, JSON) is the CLI's job; this is plain data.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace quantkit::onnx_io {

struct WeightStats {
  int64_t count = 0;
  uint64_t bytes = 0;
};

struct ValueSummary {
  std::string name;
  std::string dtype;              // ONNX spelling, "?" when undeclared
  std::vector<std::string> dims;  // "224", "N" (symbolic) or "?"; empty for scalars
  // Per dim: its value when known, -1 when symbolic or unknown (a dim_param may be all digits).
  std::vector<int64_t> dim_values;
  bool has_shape = false;  // false: rank unknown
  std::string type;        // "float[N,3,224,224]"
};

struct ModelSummary {
  std::string path;
  int64_t ir_version = 0;
  std::vector<ir::OpsetImport> opsets;  // domain "" is ai.onnx
  std::string producer_name;
  std::string producer_version;
  // Graph inputs that are not initializers (IR < 4 lists weights as inputs too).
  std::vector<ValueSummary> inputs;
  std::vector<ValueSummary> outputs;
  int64_t num_nodes = 0;  // all graphs, subgraphs included
  int64_t num_subgraphs = 0;
  std::map<std::string, int64_t> op_histogram;  // "Conv", or "domain::Op" outside ai.onnx
  WeightStats initializers;                     // dense initializers, inline and external
  WeightStats inline_initializers;
  WeightStats external_initializers;
  std::map<std::string, WeightStats> external_files;  // by location
  WeightStats sparse_initializers;                    // values + indices bytes
  WeightStats constant_nodes;                         // ai.onnx Constant nodes
  int64_t num_functions = 0;
};

ModelSummary Summarize(const ir::Model& model);

}  // namespace quantkit::onnx_io
