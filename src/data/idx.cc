#include "data/idx.h"

#include <fmt/ranges.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <system_error>

#include "common/check.h"

namespace quantkit::data {
namespace {

// zlib reads in chunks of at most this many bytes (gzread takes an unsigned int length), and the
// payload buffer grows chunk by chunk: memory follows the bytes actually decompressed, so a forged
// header on a tiny .gz file cannot make us allocate its declared size up front.
constexpr int64_t kChunkBytes = int64_t{1} << 20;

template <typename... Args>
Status FileError(StatusCode code, const std::string& path, fmt::format_string<Args...> format,
                 Args&&... args) {
  return Status(code, path + ": " + fmt::format(format, std::forward<Args>(args)...));
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to `size` bytes; returns how many were read, or -1 after a zlib error.
int64_t ReadSome(gzFile file, uint8_t* dst, int64_t size) {
  int64_t done = 0;
  while (done < size) {
    const int64_t want = std::min(size - done, kChunkBytes);
    const int got = gzread(file, dst + done, static_cast<unsigned>(want));
    if (got < 0) return -1;
    if (got == 0) break;
    done += got;
  }
  return done;
}

// The zlib error of `file` as text, distinguishing a cut-off stream from corrupt data.
std::string GzErrorText(gzFile file) {
  int errnum = Z_OK;
  const char* text = gzerror(file, &errnum);
  if (errnum == Z_BUF_ERROR) return "truncated gzip stream (unexpected end of file)";
  if (errnum == Z_OK) return "";
  return fmt::format("corrupt gzip stream ({})", text ? text : "unknown zlib error");
}

std::string DimsText(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

}  // namespace

Result<IdxArray> ReadIdx(const std::string& path, int64_t max_bytes) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    return FileError(StatusCode::kNotFound, path, "no such file");
  if (!std::filesystem::is_regular_file(status))
    return FileError(StatusCode::kIoError, path, "not a regular file");
  const auto file_size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) return FileError(StatusCode::kIoError, path, "cannot stat: {}", ec.message());

  // gzopen reads gzip members and, transparently, plain files; gzdirect() tells which.
  GzHandle file(gzopen(path.c_str(), "rb"));
  if (!file) return FileError(StatusCode::kIoError, path, "cannot open");
  gzFile gz = file.get();

  uint8_t magic[4];
  int64_t got = ReadSome(gz, magic, 4);
  if (got < 0) return FileError(StatusCode::kInvalidModel, path, "{}", GzErrorText(gz));
  if (got < 4)
    return FileError(StatusCode::kInvalidModel, path, "{} bytes, too short for an IDX header", got);
  const uint32_t magic_value = (uint32_t{magic[0]} << 24) | (uint32_t{magic[1]} << 16) |
                               (uint32_t{magic[2]} << 8) | magic[3];
  if (magic[0] != 0 || magic[1] != 0) {
    return FileError(StatusCode::kInvalidModel, path,
                     "bad magic 0x{:08x}, expected 0x0000TTRR (IDX)", magic_value);
  }
  if (magic[2] != kIdxTypeUnsignedByte) {
    return FileError(StatusCode::kUnsupported, path,
                     "IDX element type 0x{:02x} is not supported (only 0x08, unsigned byte)",
                     magic[2]);
  }
  const int rank = magic[3];
  if (rank < 1 || rank > kIdxMaxRank) {
    return FileError(StatusCode::kInvalidModel, path,
                     "IDX rank {} (magic 0x{:08x}), expected 1 to {}", rank, magic_value,
                     kIdxMaxRank);
  }

  IdxArray array;
  uint8_t dim_bytes[4 * kIdxMaxRank];
  got = ReadSome(gz, dim_bytes, 4 * rank);
  if (got < 0) return FileError(StatusCode::kInvalidModel, path, "{}", GzErrorText(gz));
  if (got < 4 * rank)
    return FileError(StatusCode::kInvalidModel, path, "header cut after {} of {} dimension bytes",
                     got, 4 * rank);
  // Each dim is < 2^32, so the running product saturates instead of overflowing int64.
  int64_t payload = 1;
  for (int i = 0; i < rank; ++i) {
    const uint8_t* b = dim_bytes + 4 * i;
    const int64_t dim = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3];
    array.dims.push_back(dim);
    payload = (dim != 0 && payload > std::numeric_limits<int64_t>::max() / dim)
                  ? std::numeric_limits<int64_t>::max()
                  : payload * dim;
  }
  const int64_t header = 4 + 4 * int64_t{rank};
  if (payload == std::numeric_limits<int64_t>::max()) {
    return FileError(StatusCode::kInvalidModel, path, "dims {} overflow a 64-bit byte count",
                     DimsText(array.dims));
  }
  const bool compressed = gzdirect(gz) == 0;
  // A plain file must hold exactly header + payload bytes: check before allocating anything.
  if (!compressed && file_size - header != payload) {
    return FileError(StatusCode::kInvalidModel, path, "dims {} need {} bytes, the file has {}",
                     DimsText(array.dims), header + payload, file_size);
  }
  if (payload > max_bytes) {
    return FileError(StatusCode::kResourceExhausted, path,
                     "dims {} declare {} bytes, above the limit of {}", DimsText(array.dims),
                     payload, max_bytes);
  }

  while (static_cast<int64_t>(array.values.size()) < payload) {
    const int64_t offset = static_cast<int64_t>(array.values.size());
    const int64_t want = std::min(payload - offset, kChunkBytes);
    array.values.resize(offset + want);
    got = ReadSome(gz, array.values.data() + offset, want);
    if (got < 0) return FileError(StatusCode::kInvalidModel, path, "{}", GzErrorText(gz));
    if (got < want) {
      const std::string zerr = GzErrorText(gz);
      return FileError(
          StatusCode::kInvalidModel, path, "{}: {} of the {} bytes declared by dims {}",
          zerr.empty() ? "payload ends early" : zerr, offset + got, payload, DimsText(array.dims));
    }
  }
  // Reading past the payload makes zlib check the gzip trailer (CRC-32, length) and shows
  // trailing bytes, which would mean the dims describe a different file.
  uint8_t extra = 0;
  got = ReadSome(gz, &extra, 1);
  const std::string zerr = GzErrorText(gz);
  if (got < 0 || !zerr.empty()) return FileError(StatusCode::kInvalidModel, path, "{}", zerr);
  if (got > 0) {
    return FileError(StatusCode::kInvalidModel, path,
                     "trailing bytes after the {} bytes declared by dims {}", payload,
                     DimsText(array.dims));
  }
  return array;
}

Status Preprocessing::Validate(int64_t channels) const {
  QK_RETURN_IF_NOT(std::isfinite(scale_divisor) && scale_divisor > 0, StatusCode::kInvalidArgument,
                   "preprocessing: scale_divisor {} must be finite and > 0", scale_divisor);
  QK_RETURN_IF_NOT(mean.size() == std.size(), StatusCode::kInvalidArgument,
                   "preprocessing: {} mean values but {} std values", mean.size(), std.size());
  QK_RETURN_IF_NOT(mean.empty() || static_cast<int64_t>(mean.size()) == channels,
                   StatusCode::kInvalidArgument,
                   "preprocessing: {} mean/std values for {} channels", mean.size(), channels);
  for (size_t c = 0; c < mean.size(); ++c) {
    QK_RETURN_IF_NOT(
        std::isfinite(mean[c]) && std::isfinite(std[c]) && std[c] > 0, StatusCode::kInvalidArgument,
        "preprocessing: channel {} has mean {} std {} (need finite, std > 0)", c, mean[c], std[c]);
  }
  return Status::Ok();
}

Preprocessing FashionMnistPreprocessing() { return Preprocessing{255.0f, {0.2860f}, {0.3530f}}; }

Result<IdxImageDataset> IdxImageDataset::Open(const std::string& images_path,
                                              const std::string& labels_path,
                                              Preprocessing preprocessing) {
  QK_RETURN_IF_ERROR(preprocessing.Validate(/*channels=*/1));
  QK_ASSIGN_OR_RETURN(IdxArray images, ReadIdx(images_path));
  QK_ASSIGN_OR_RETURN(IdxArray labels, ReadIdx(labels_path));
  if (images.dims.size() != 3) {
    return FileError(StatusCode::kInvalidModel, images_path,
                     "image file has dims {}, expected rank 3 (N x H x W)", DimsText(images.dims));
  }
  if (labels.dims.size() != 1) {
    return FileError(StatusCode::kInvalidModel, labels_path,
                     "label file has dims {}, expected rank 1 (N)", DimsText(labels.dims));
  }
  if (labels.dims[0] != images.dims[0]) {
    return FileError(StatusCode::kInvalidModel, labels_path, "{} labels for {} images in {}",
                     labels.dims[0], images.dims[0], images_path);
  }
  IdxImageDataset ds;
  ds.images_path_ = images_path;
  ds.count_ = images.dims[0];
  ds.height_ = images.dims[1];
  ds.width_ = images.dims[2];
  ds.pixels_ = std::move(images.values);
  ds.labels_.assign(labels.values.begin(), labels.values.end());
  ds.preprocessing_ = std::move(preprocessing);
  return ds;
}

Status IdxImageDataset::CheckIndices(const std::vector<int64_t>& indices) const {
  for (int64_t index : indices) {
    QK_RETURN_IF_NOT(index >= 0 && index < count_, StatusCode::kInvalidArgument,
                     "{}: image index {} out of range [0, {})", images_path_, index, count_);
  }
  return Status::Ok();
}

Result<ir::Tensor> IdxImageDataset::Images(const std::vector<int64_t>& indices) const {
  QK_RETURN_IF_ERROR(CheckIndices(indices));
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t plane = height_ * width_;
  ir::Tensor out(ir::DType::kFloat, {n, 1, height_, width_});
  float* dst = out.mutable_data_as<float>();
  const bool normalize = !preprocessing_.mean.empty();
  const float divisor = preprocessing_.scale_divisor;
  const float mean = normalize ? preprocessing_.mean[0] : 0.0f;
  const float stddev = normalize ? preprocessing_.std[0] : 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* src = pixels_.data() + indices[i] * plane;
    for (int64_t p = 0; p < plane; ++p) {
      // Divide (not multiply by 1/255) and keep the order: Python does the same float32 ops,
      // so tensors match bit for bit.
      float x = static_cast<float>(src[p]) / divisor;
      if (normalize) x = (x - mean) / stddev;
      dst[i * plane + p] = x;
    }
  }
  return out;
}

Result<ir::Tensor> IdxImageDataset::Labels(const std::vector<int64_t>& indices) const {
  QK_RETURN_IF_ERROR(CheckIndices(indices));
  ir::Tensor out(ir::DType::kInt64, {static_cast<int64_t>(indices.size())});
  int64_t* dst = out.mutable_data_as<int64_t>();
  for (size_t i = 0; i < indices.size(); ++i) dst[i] = labels_[indices[i]];
  return out;
}

std::string FashionMnistImagesPath(const std::string& dir, const std::string& part) {
  return dir + "/" + part + "-images-idx3-ubyte.gz";
}

std::string FashionMnistLabelsPath(const std::string& dir, const std::string& part) {
  return dir + "/" + part + "-labels-idx1-ubyte.gz";
}

}  // namespace quantkit::data
