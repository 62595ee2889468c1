// quantkit::BatchStream: where the public pipelines get their samples from. Anything that can
// hand out batches implements it: a Python iterable of {input_name: ndarray} batches, an
// onnxruntime CalibrationDataReader, a torch DataLoader, or quantkit's own data specs
// (OpenDataSpec: .npy/.npz, folders, images, fashion-mnist, JSON configs; docs/data-sources.md).
//
// Contract:
//   * Next() returns the next batch, or std::nullopt at the end; an error ends the run and its
//     message is reported with the batch index.
//   * Every batch maps each model input name to an array whose leading dimension is the batch
//     size; batches may differ in size. Arrays are read in place (no copy): `data` must stay
//     valid, C-contiguous and unchanged while `keep_alive` is held — quantkit holds it until the
//     batch has run.
//   * dtypes and per-sample shapes are checked against the model before any compute; a mismatch
//     is an error naming the input, never a silent conversion.
// Public header: standard library and quantkit types only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quantkit/status.h"

namespace quantkit {

// Element types an array can have (ONNX names). A model input reads its own type only: data of
// another type is refused naming both, never converted.
enum class ElementType {
  kFloat32,
  kFloat16,
  kFloat64,
  kInt8,
  kUint8,
  kInt32,
  kInt64,
  kBool,
  kInt16,
  kUint16,
  kUint32,
  kUint64
};

// "float32", "int64", ...
const char* ElementTypeName(ElementType type);

// A C-contiguous host array borrowed from the caller.
struct ArrayView {
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> shape;  // leading dimension: samples in the batch
  const void* data = nullptr;
  std::shared_ptr<const void> keep_alive;  // owns `data` (e.g. a reference to a numpy array)
};

struct InputBatch {
  std::map<std::string, ArrayView> inputs;  // model input name -> [batch, ...]
  std::optional<ArrayView> labels;          // int64 [batch] class indices, when known
};

class BatchStream {
 public:
  virtual ~BatchStream() = default;
  virtual Result<std::optional<InputBatch>> Next() = 0;
  // One line for reports and plan provenance ("2048 batches from a DataLoader").
  virtual std::string Describe() const = 0;
  // Samples the stream will produce when known (progress bar and ETA), else -1.
  virtual int64_t size_hint() const { return -1; }
};

// Declared image preprocessing for an image-folder spec (the CLI's --resize, --center-crop,
// --mean, --std, --color, --layout, --scale as text; empty = not declared).
struct ImagePreprocessing {
  std::string resize, center_crop, color, layout;
  std::string mean, std;
  std::optional<double> scale;
};

struct DataSpecOptions {
  int64_t batch_size = 32;
  int64_t samples = 0;  // 0: everything the spec holds
  ImagePreprocessing image;
};

}  // namespace quantkit
