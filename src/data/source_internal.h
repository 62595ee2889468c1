// Pieces shared by the source implementations (not part of the public data API).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "data/source.h"

namespace quantkit::data::internal {

// Checks dtype and per-sample dims against the model input (float16/float64 -> float32).
// `batched`: the leading dim of `t` counts samples. `note` receives a conversion note.
Result<ir::Tensor> Conform(ir::Tensor t, const InputSpec& spec, bool batched,
                           const std::string& origin, std::string* note);
// A single sample as a batch of one: [d0, ...] -> [1, d0, ...].
ir::Tensor WithLeadingDim(ir::Tensor t);
// OpenSource without the model-layout view: Read() stacks samples on a new leading axis.
Result<std::unique_ptr<Source>> OpenSampleSource(const std::string& spec,
                                                 const std::vector<InputSpec>& inputs,
                                                 const ImageOptions& image = {});
// Sample-major [count, sample dims...] -> the model's layout for `spec` (samples on its batch
// axis; an unbatched input's one value, which every sample must share).
Result<ir::Tensor> SamplesToModelLayout(ir::Tensor t, const InputSpec& spec);
// A tensor in the model's layout (an input_K.pb of a recorded call) -> sample-major.
Result<ir::Tensor> ModelLayoutToSamples(ir::Tensor t, const InputSpec& spec,
                                        const std::string& origin);
// Wraps a sample-major source so that Read() returns model-layout batches (batching.cc).
std::unique_ptr<Source> WithModelLayout(std::unique_ptr<Source> source,
                                        const std::vector<InputSpec>& inputs);
// Applies `take` (a first-n limit) below a model-layout view, keeping the view outermost so that
// ReadStackable can gather samples of equal shapes from anywhere in a window.
std::unique_ptr<Source> TakeBelowLayout(
    std::unique_ptr<Source> source, int64_t n,
    const std::function<std::unique_ptr<Source>(std::unique_ptr<Source>, int64_t)>& take);
// Stacks equally shaped samples into [N, ...].
Result<ir::Tensor> StackRows(const std::vector<const ir::Tensor*>& rows, const std::string& name);

// Arrays keyed by input name (a single unnamed array feeds a single-input model); an array of
// the model's rank is a batch of samples, one rank lower a single sample.
// `mappings` (by array name) are the memory-mapped files the arrays view (data/npy.h MapNpy);
// their pages are released as the data is consumed.
using Mappings = std::map<std::string, std::shared_ptr<const MappedFile>>;
Result<std::unique_ptr<Source>> MakeArraySource(
    std::vector<std::pair<std::string, ir::Tensor>> arrays, const std::vector<InputSpec>& inputs,
    const std::string& origin, const Mappings& mappings = {});

// The header of a .npy image whose first bytes are `bytes[0, available)` and whose whole size
// is `total_size` (a member streamed out of an archive): dtype, shape and where the data starts,
// all checked against total_size. `available` must cover the preamble and the header (at most
// kNpyPreambleMax + kMaxNpyHeaderBytes); a short `available` is reported as a truncated header.
struct NpyHeader {
  ir::DType dtype = ir::DType::kUndefined;
  size_t item_size = 0;
  bool big_endian = false;
  bool fortran = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};
inline constexpr size_t kNpyPreambleMax = 12;
Result<NpyHeader> ParseNpyHeader(const uint8_t* bytes, size_t available, uint64_t total_size,
                                 const std::string& source);

// FILE.npz, streamed member by member, row by row (npz_source.cc).
Result<std::unique_ptr<Source>> OpenNpz(const std::string& path,
                                        const std::vector<InputSpec>& inputs);

// DIR/test_data_set_*/input_K.pb (the ONNX backend-test layout): one sample set per folder.
Result<std::unique_ptr<Source>> OpenTensorProtoDir(const std::string& dir,
                                                   const std::vector<InputSpec>& inputs);
// fashion-mnist[:calib|val|test|train]
Result<std::unique_ptr<Source>> OpenFashionMnist(const std::string& spec,
                                                 const std::vector<InputSpec>& inputs);

// Whether DIR holds .png/.jpg/.jpeg images directly or in class subfolders (an error for a
// symbolic link loop in it).
Result<bool> IsImageFolder(const std::string& dir);
// DIR/*.{png,jpg,jpeg} or DIR/<class>/... (image_source.cc), with the declared preprocessing.
Result<std::unique_ptr<Source>> OpenImageFolder(const std::string& dir, const InputSpec& spec,
                                                const ImageOptions& options);
// FILE.json: {input name -> image folder + preprocessing | data spec} (data_config.cc). An entry
// may name another config; a config that includes itself (directly or through others) or nesting
// deeper than kMaxDataConfigNesting is kInvalidArgument naming the chain.
inline constexpr size_t kMaxDataConfigNesting = 16;
Result<std::unique_ptr<Source>> OpenDataConfig(const std::string& path,
                                               const std::vector<InputSpec>& inputs);

}  // namespace quantkit::data::internal
