#include "ir/tensor.h"

#include <algorithm>

namespace quantkit::ir {
namespace {
int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}
}  // namespace

Tensor::Tensor(DType dtype, std::vector<int64_t> dims) : dtype_(dtype), dims_(std::move(dims)) {
  const int64_t n = Product(dims_);
  if (dtype_ == DType::kString) {
    strings_.resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
    return;
  }
  nbytes_ = StorageBytes(dtype_, n);
  buffer_ = std::make_shared<HeapBuffer>(nbytes_);
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims, std::shared_ptr<const Buffer> buffer,
               size_t offset)
    : dtype_(dtype), dims_(std::move(dims)), buffer_(std::move(buffer)), offset_(offset) {
  nbytes_ = StorageBytes(dtype_, Product(dims_));
}

int64_t Tensor::numel() const { return Product(dims_); }

void* Tensor::mutable_data() {
  if (!buffer_) return nullptr;
  // Copy on write: the buffer may be shared with another tensor or be a read-only mapping.
  auto* heap = dynamic_cast<const HeapBuffer*>(buffer_.get());
  if (heap == nullptr || buffer_.use_count() > 1 || offset_ != 0 || heap->size() != nbytes_) {
    auto copy = std::make_shared<HeapBuffer>(nbytes_);
    if (nbytes_) std::memcpy(copy->mutable_data(), buffer_->data() + offset_, nbytes_);
    buffer_ = copy;
    offset_ = 0;
    return copy->mutable_data();
  }
  return const_cast<HeapBuffer*>(heap)->mutable_data();
}

bool Tensor::ContentEquals(const Tensor& other) const {
  if (dtype_ != other.dtype_ || dims_ != other.dims_) return false;
  if (dtype_ == DType::kString) return strings_ == other.strings_;
  if (nbytes_ != other.nbytes_) return false;
  return nbytes_ == 0 || std::memcmp(data(), other.data(), nbytes_) == 0;
}

}  // namespace quantkit::ir
