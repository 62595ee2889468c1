// Data sources: where calibration and evaluation samples come from, declared once and read the
// same way by `calibrate`, `eval` and `diagnose`.
//
// A Source holds N samples with random access by index, so batching (--batch-size), sample caps
// (--samples) and sharding never depend on the kind of source. Each sample maps every model
// input name to a tensor WITHOUT the batch dimension; Read() stacks samples into a batch.
//
// Spec strings (ParseSourceSpec):
//   NAME=FILE.npy[,NAME=FILE.npy...]  one array per input; leading dim = samples
//   FILE.npy                          single-input models
//   FILE.npz                          one array per input, keys = input names
//   DIR                               DIR/<input>.npy per input, or DIR/*.npy one sample per file
//                                     (sorted by name), or DIR/test_data_set_*/input_K.pb
//   fashion-mnist[:calib|val|test|train]   Debian's Fashion-MNIST with the zoo's fixed splits
//   DIR of images                     DIR/*.{png,jpg,jpeg} (unlabelled) or DIR/<class>/*.jpg
//                                     (torchvision ImageFolder labels: index of the sorted class
//                                     name), preprocessed as declared by ImageOptions
//   FILE.json                         data config: {"inputs": {NAME: {"images": DIR, "resize":
//                                     256, "center_crop": 224, "color": "rgb", "layout": "nchw",
//                                     "scale": 0.00392, "mean": [...], "std": [...]} or
//                                     {"data": SPEC}}}; a single-input model may give the entry
//                                     at the top level (docs/data-sources.md)
//
// Samples are always in a fixed order (sorted paths, file order); nothing is shuffled.
// .npy arrays are memory-mapped and read lazily, batch by batch, with the pages already consumed
// given back, so peak memory does not grow with the file size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/image_options.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::data {

struct Batch {
  std::vector<std::pair<std::string, ir::Tensor>> inputs;  // stacked [B, ...]
  std::optional<ir::Tensor> labels;                        // int64 [B] when the data has labels
  int64_t size = 0;
};

class Source {
 public:
  virtual ~Source() = default;
  virtual int64_t num_samples() const = 0;
  // Input names this source provides.
  virtual std::vector<std::string> input_names() const = 0;
  // Samples [start, start+count) stacked along a new leading batch dimension.
  virtual Result<Batch> Read(int64_t start, int64_t count) const = 0;
  // One line for reports and provenance: "fashion-mnist:calib (2048 samples)".
  virtual std::string Describe() const = 0;
  // Identifies the content (file names, sizes and a hash of the bytes read at open time).
  virtual std::string Fingerprint() const = 0;
  // The largest batch the model accepts (a fixed batch dim), or 0 for any.
  virtual int64_t max_batch() const { return 0; }
};

// batch_axis value of an input that is fed as is, once per run (a scalar sample rate, a fixed
// table): samples are batched together only when their values of it are equal.
constexpr int64_t kUnbatched = -1;

// The model inputs a source must feed: name, dtype and dims (-1 for dynamic).
//
// Sources hold samples "sample-major": per input a tensor of SampleDims() (the model's dims
// without the batch axis); Read() returns them in the model's layout, the samples stacked on
// batch_axis (a recurrent state [layers, B, H] has batch_axis 1) or, for an unbatched input, the
// one value all samples of the batch share.
struct InputSpec {
  std::string name;
  ir::DType dtype = ir::DType::kFloat;
  std::vector<int64_t> dims;  // empty when the rank is unknown, unless has_rank (a scalar)
  bool has_rank = false;
  int64_t batch_axis = 0;  // axis of dims the samples stack on, or kUnbatched

  bool batched() const { return batch_axis != kUnbatched; }
  // Per-sample dims (-1 dynamic); empty with !has_rank.
  std::vector<int64_t> SampleDims() const;
  // The batch size the model fixes (dims[batch_axis] > 0), else 0: any batch size.
  int64_t FixedBatch() const;
};
// Non-initializer graph inputs of a model, with each input's batch axis from the model's shapes:
// the axis whose symbolic name is another input's leading dim (state [2, batch, 128] beside
// input [batch, 512]); else, for a leading dim fixed above 1 followed by a dynamic dim, that
// dim (the [layers, B, H] / [T, B, F] layouts of recurrent states); else axis 0 (which may be a
// fixed batch of 1). Rank-0 inputs are unbatched. A data config may override it per input.
std::vector<InputSpec> ModelInputs(const ir::Model& model);

// Opens a source and checks it against the model inputs: every input fed, per-sample dtype and
// fixed dims matching (float32 data for a float16/bfloat16 input is rounded to it, with a note
// in Describe(); any other dtype mismatch is an error).
// Errors name the file, the input and the shapes/dtypes seen and expected. `image` is the
// preprocessing declared on the command line for an image-folder spec; declaring it for any
// other kind of source (a JSON config carries its own) is an error rather than ignored.
Result<std::unique_ptr<Source>> OpenSource(const std::string& spec,
                                           const std::vector<InputSpec>& inputs,
                                           const ImageOptions& image = {});

// Writes every sample as the model would receive it: DIR/<input>.npy stacked [N, ...] and, when
// the data has labels, DIR/labels.npy (int64). Holds all samples in memory: a tool for checking
// preprocessing on a few images (`quantkit data`), not for whole datasets. DIR is locked and the
// files are written as one set (common/artifact_set.h): a failure leaves DIR as it was.
Status DumpSamples(const Source& source, const std::string& dir);

// Limits a source to its first `n` samples (n <= 0: all).
std::unique_ptr<Source> Take(std::unique_ptr<Source> source, int64_t n);

// Reads samples [start, start+count) as few batches as the data allows, never failing for shape:
// one batch when every sample stacks (same per-sample shapes, same values of unbatched inputs),
// else one batch per run of consecutive samples that do (text lines of varying width, pages of
// different sizes, a scalar input that changes). The batches keep the sample order. Errors are
// those of reading a single sample. `count` should respect source.max_batch().
Result<std::vector<Batch>> ReadStackable(const Source& source, int64_t start, int64_t count);

// The batch size to use with `source`: `requested`, capped by the model's fixed batch.
int64_t EffectiveBatchSize(const Source& source, int64_t requested);

// Checks a batch handed over by a host program (the Python API: one {input: array} batch of a
// DataLoader) against the model inputs: every input fed, no unknown name, rank >= 1, one batch
// size for all inputs, per-sample dtype and dims as OpenSource checks them. float16/float64 data
// is converted to float32 (a copy); everything else keeps the caller's buffer (no copy).
// `origin` names the batch in errors ("batch 3").
Result<Batch> ConformBatch(std::vector<std::pair<std::string, ir::Tensor>> arrays,
                           const std::vector<InputSpec>& inputs, const std::string& origin);

}  // namespace quantkit::data
