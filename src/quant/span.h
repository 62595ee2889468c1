// Non-owning views of float data handed to collectors. Collectors copy what they summarise and
// never keep these pointers (style.md §8: collectors own summaries only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace quantkit::quant {

// `size` contiguous float32 values starting at `data` (may be null when size == 0).
struct FloatSpan {
  const float* data = nullptr;
  size_t size = 0;

  FloatSpan() = default;
  FloatSpan(const float* d, size_t n) : data(d), size(n) {}
  explicit FloatSpan(const std::vector<float>& v) : data(v.data()), size(v.size()) {}
  const float* begin() const { return data; }
  const float* end() const { return data + size; }
  FloatSpan subspan(size_t offset, size_t count) const { return FloatSpan(data + offset, count); }
};

// A dense row-major float32 tensor view: values plus dims (product of dims == values.size).
struct TensorView {
  FloatSpan values;
  std::vector<int64_t> dims;
};

}  // namespace quantkit::quant
