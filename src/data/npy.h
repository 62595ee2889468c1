// NumPy .npy files (format versions 1.0, 2.0, 3.0) as ir::Tensor.
//
// Supported dtypes: float16/32/64, int8/16/32/64, uint8/16/32/64, bool; either byte order
// (big-endian data is swapped to host order); C or Fortran order (Fortran data is transposed to
// row-major). Files are treated as hostile: the magic, version, header length, header syntax,
// keys, shape (non-negative, no overflow) and the data size are checked against the file size
// before anything is allocated. Errors are one line and start with the file name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::data {

// Largest header accepted (numpy itself writes < 64 KiB headers; v2/v3 allow 4 GiB).
inline constexpr uint32_t kMaxNpyHeaderBytes = 1u << 20;

Result<ir::Tensor> ReadNpy(const std::string& path);
// Like ReadNpy, but memory-maps the file and returns a tensor viewing its data without a copy
// when the layout allows (little-endian, C order: what numpy writes); `*mapping` then receives
// the mapping (for MappedFile::Release), else it is reset and the data was copied.
Result<ir::Tensor> MapNpy(const std::string& path, std::shared_ptr<const MappedFile>* mapping);
// Parses an in-memory .npy image; `source` names it in errors.
Result<ir::Tensor> ParseNpy(const uint8_t* bytes, size_t size, const std::string& source);

// Writes a little-endian, C-order version-1.0 .npy file (numeric dtypes above), atomically.
Status WriteNpy(const std::string& path, const ir::Tensor& tensor);
// The bytes WriteNpy writes; `where` names the array in errors.
Result<std::string> EncodeNpy(const ir::Tensor& tensor, const std::string& where);

// Converts any numeric tensor to float32 values (float64 rounds to nearest, integers convert as
// static_cast<float>, float16 exactly).
Result<std::vector<float>> ToFloat32(const ir::Tensor& tensor);

}  // namespace quantkit::data
