// IDX files (the MNIST / Fashion-MNIST container) as a quantkit data source.
//
// Format (big-endian): bytes 0-1 are zero, byte 2 is the element type, byte 3 the rank; then one
// uint32 per dimension; then the elements in row-major order. quantkit reads element type 0x08
// (unsigned byte), which is what image and label files of these datasets use. Files may be
// gzip-compressed (detected by the 1f 8b magic, as Debian's dataset-fashion-mnist ships them).
//
// Every file is hostile: the header, each dimension and the payload size are checked against the
// bytes available (file size, or the gzip ISIZE trailer) and a byte limit before anything is
// allocated, and a gzip stream must end exactly after the payload with a valid CRC. Failures are
// one-line Status messages that start with the file path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::data {

// Refuse payloads above this many bytes unless the caller raises the limit (60,000 28x28 images
// are 47 MB; this leaves room for larger IDX datasets without letting a forged header allocate
// gigabytes).
inline constexpr int64_t kDefaultMaxIdxBytes = int64_t{1} << 30;
inline constexpr uint8_t kIdxTypeUnsignedByte = 0x08;
inline constexpr int kIdxMaxRank = 4;

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // row-major, product(dims) bytes
};

// Reads an unsigned-byte IDX file, raw or gzip-compressed.
// Errors: kNotFound (no such file), kIoError (cannot read), kInvalidModel (bad magic, element
// type, rank, dims inconsistent with the file size, truncated or corrupt gzip, trailing bytes),
// kResourceExhausted (payload above max_bytes).
Result<IdxArray> ReadIdx(const std::string& path, int64_t max_bytes = kDefaultMaxIdxBytes);

// Declared image preprocessing, applied in float32 arithmetic in exactly this order
// (qkdev/zoo/data.py does the same, so both produce bit-identical tensors):
//   x = float(pixel) / scale_divisor;   x = (x - mean[c]) / std[c]   (when mean/std are given)
struct Preprocessing {
  float scale_divisor = 255.0f;
  std::vector<float> mean;  // empty, or one value per channel
  std::vector<float> std;   // same size as mean; every value > 0

  Status Validate(int64_t channels) const;
};

// The preprocessing of the quantkit zoo (models/zoo/manifest.json): 1/255, mean 0.2860, std 0.3530.
Preprocessing FashionMnistPreprocessing();

// An image IDX file (rank 3: N x H x W, one channel) paired with its label IDX file (rank 1: N).
// Holds the raw bytes; batches are converted on request.
class IdxImageDataset {
 public:
  // Errors as ReadIdx, plus kInvalidModel when ranks or counts of the two files disagree and
  // kInvalidArgument for an invalid preprocessing.
  static Result<IdxImageDataset> Open(const std::string& images_path,
                                      const std::string& labels_path,
                                      Preprocessing preprocessing = {});

  int64_t size() const { return count_; }
  int64_t height() const { return height_; }
  int64_t width() const { return width_; }
  const Preprocessing& preprocessing() const { return preprocessing_; }
  // All labels, in file order.
  const std::vector<int64_t>& labels() const { return labels_; }

  // float32 [indices.size(), 1, H, W] with the declared preprocessing applied.
  // kInvalidArgument when an index is outside [0, size()).
  Result<ir::Tensor> Images(const std::vector<int64_t>& indices) const;
  // int64 [indices.size()].
  Result<ir::Tensor> Labels(const std::vector<int64_t>& indices) const;

 private:
  Status CheckIndices(const std::vector<int64_t>& indices) const;

  std::string images_path_;
  int64_t count_ = 0, height_ = 0, width_ = 0;
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
  Preprocessing preprocessing_;
};

// Paths of Debian's dataset-fashion-mnist files; `part` is "train" or "t10k".
std::string FashionMnistImagesPath(const std::string& dir, const std::string& part);
std::string FashionMnistLabelsPath(const std::string& dir, const std::string& part);
inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

}  // namespace quantkit::data
