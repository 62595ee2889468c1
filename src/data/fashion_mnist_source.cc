// fashion-mnist[:calib|val|test|train][@DIR]: Debian's Fashion-MNIST with the zoo's fixed splits
// (docs/fashion-mnist-splits.md) and its declared preprocessing (x/255, mean 0.2860, std 0.3530).
// The splits are recomputed from the labels with the documented rule (identical to
// data/fashion_mnist_splits.json, which a test checks), so no repository file is needed at run
// time.
#include <numeric>

#include "common/check.h"
#include "common/sha256.h"
#include "data/idx.h"
#include "data/source_internal.h"
#include "data/splits.h"
#include "ir/float16.h"

namespace quantkit::data::internal {
namespace {

class FashionMnistSource final : public Source {
 public:
  FashionMnistSource(IdxImageDataset dataset, std::vector<int64_t> indices, std::string input,
                     ir::DType dtype, std::string description, std::string fingerprint)
      : dataset_(std::move(dataset)),
        indices_(std::move(indices)),
        input_(std::move(input)),
        dtype_(dtype),
        description_(std::move(description)),
        fingerprint_(std::move(fingerprint)) {}

  int64_t num_samples() const override { return static_cast<int64_t>(indices_.size()); }
  std::vector<std::string> input_names() const override { return {input_}; }
  Result<Batch> Read(int64_t start, int64_t count) const override {
    QK_RETURN_IF_NOT(start >= 0 && count > 0 && start + count <= num_samples(),
                     StatusCode::kInternal, "fashion-mnist: samples [{}, {}) out of range", start,
                     start + count);
    const std::vector<int64_t> idx(indices_.begin() + start, indices_.begin() + start + count);
    Batch b;
    b.size = count;
    QK_ASSIGN_OR_RETURN(ir::Tensor images, dataset_.Images(idx));
    // A float16/bfloat16 input (a model written with --cast-io): the preprocessed float32 images
    // rounded to it, as data::Conform rounds float32 arrays.
    if (dtype_ != ir::DType::kFloat) {
      QK_ASSIGN_OR_RETURN(images, ir::ConvertFloatTensor(images, dtype_));
    }
    QK_ASSIGN_OR_RETURN(ir::Tensor labels, dataset_.Labels(idx));
    b.inputs.emplace_back(input_, std::move(images));
    b.labels = std::move(labels);
    return b;
  }
  std::string Describe() const override { return description_; }
  std::string Fingerprint() const override { return fingerprint_; }

 private:
  IdxImageDataset dataset_;
  std::vector<int64_t> indices_;
  std::string input_;
  ir::DType dtype_;
  std::string description_;
  std::string fingerprint_;
};

}  // namespace

Result<std::unique_ptr<Source>> OpenFashionMnist(const std::string& spec,
                                                 const std::vector<InputSpec>& inputs) {
  std::string rest = spec.substr(std::string("fashion-mnist").size());
  std::string dir = kFashionMnistDefaultDir;
  if (const size_t at = rest.find('@'); at != std::string::npos) {
    dir = rest.substr(at + 1);
    rest = rest.substr(0, at);
  }
  std::string split = "calib";
  if (!rest.empty()) {
    QK_RETURN_IF_NOT(rest[0] == ':', StatusCode::kInvalidArgument,
                     "data '{}': expected fashion-mnist[:calib|val|test|train][@DIR]", spec);
    split = rest.substr(1);
  }
  QK_RETURN_IF_NOT(split == "calib" || split == "val" || split == "test" || split == "train",
                   StatusCode::kInvalidArgument,
                   "data '{}': unknown split '{}' (calib, val, test, train)", spec, split);
  QK_RETURN_IF_NOT(inputs.size() == 1, StatusCode::kInvalidArgument,
                   "fashion-mnist feeds one image input; the model has {} inputs", inputs.size());
  const InputSpec& in = inputs.front();
  QK_RETURN_IF_NOT(
      in.dtype == ir::DType::kFloat || ir::Is16BitFloat(in.dtype), StatusCode::kInvalidArgument,
      "fashion-mnist yields float images but input '{}' is {}", in.name, ir::DTypeName(in.dtype));
  if (!in.dims.empty()) {
    const bool ok = in.dims.size() == 4 && (in.dims[1] < 0 || in.dims[1] == 1) &&
                    (in.dims[2] < 0 || in.dims[2] == 28) && (in.dims[3] < 0 || in.dims[3] == 28);
    QK_RETURN_IF_NOT(ok, StatusCode::kInvalidArgument,
                     "fashion-mnist yields [N,1,28,28] images but input '{}' has rank {} and "
                     "different dims",
                     in.name, in.dims.size());
  }
  const std::string part = split == "test" ? "t10k" : "train";
  const std::string images = FashionMnistImagesPath(dir, part);
  QK_ASSIGN_OR_RETURN(IdxImageDataset dataset,
                      IdxImageDataset::Open(images, FashionMnistLabelsPath(dir, part),
                                            FashionMnistPreprocessing()));
  std::vector<int64_t> indices;
  if (split == "test") {
    indices.resize(static_cast<size_t>(dataset.size()));
    std::iota(indices.begin(), indices.end(), 0);
  } else {
    QK_ASSIGN_OR_RETURN(Splits splits, ComputeSplits(dataset.labels(), FashionMnistSplitSpec()));
    indices = split == "calib" ? splits.calib : split == "val" ? splits.val : splits.train;
  }
  QK_ASSIGN_OR_RETURN(std::string file_hash, Sha256OfFile(images));
  const std::string description =
      fmt::format("fashion-mnist:{} ({} samples, {})", split, indices.size(), images);
  return std::unique_ptr<Source>(new FashionMnistSource(std::move(dataset), std::move(indices),
                                                        in.name, in.dtype, description,
                                                        file_hash + ":" + split));
}

}  // namespace quantkit::data::internal
