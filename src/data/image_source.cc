// Image folders: DIR/*.{png,jpg,jpeg} (unlabelled, sorted by name) or
// DIR/<class>/**/*.{png,jpg,jpeg} (torchvision ImageFolder: label = index of the class folder in
// sorted order). Images are decoded lazily in Read(), so memory does not depend on the number of
// images.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include "common/check.h"
#include "common/dir_walk.h"
#include "common/sha256.h"
#include "data/image.h"
#include "data/image_options_text.h"
#include "data/source_internal.h"

namespace quantkit::data {
namespace fs = std::filesystem;

bool ImageOptions::declared() const {
  return resize_short > 0 || !resize_hw.empty() || !crop_hw.empty() || color != ColorOrder::kAuto ||
         layout != Layout::kAuto || scale.has_value() || !mean.empty() || !std.empty();
}

std::string ImageOptions::Describe() const {
  auto list = [](const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{:g}", i ? "," : "", v[i]);
    return s + "]";
  };
  std::vector<std::string> parts;
  if (resize_short > 0) parts.push_back(fmt::format("resize {}", resize_short));
  if (!resize_hw.empty()) parts.push_back(fmt::format("resize {}x{}", resize_hw[0], resize_hw[1]));
  if (!crop_hw.empty()) parts.push_back(fmt::format("center crop {}x{}", crop_hw[0], crop_hw[1]));
  parts.push_back(color == ColorOrder::kGray ? "gray" : color == ColorOrder::kBgr ? "bgr" : "rgb");
  parts.push_back(layout == Layout::kNhwc ? "NHWC" : "NCHW");
  parts.push_back(fmt::format("scale {:g}", scale.value_or(1.0 / 255.0)));
  if (!mean.empty()) parts.push_back("mean " + list(mean));
  if (!std.empty()) parts.push_back("std " + list(std));
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  return s;
}

// The largest resize or crop side: a resized image is materialized, and 65536^2 RGB floats are
// already 48 GB.
constexpr int64_t kMaxImageSide = 65536;
// The largest image after resize (as data/image.cc's decode limit, 2^28 pixels).
constexpr int64_t kMaxResizedPixels = int64_t{1} << 28;

Result<std::vector<int64_t>> ParseSize(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  std::string item;
  std::string normalized = text;
  std::replace(normalized.begin(), normalized.end(), 'x', ',');
  // getline drops a trailing empty item: "12x" must not read as "12".
  QK_RETURN_IF_NOT(!normalized.empty() && normalized.back() != ',', StatusCode::kInvalidArgument,
                   "{} '{}' is not a size (N or HxW, positive)", what, text);
  std::stringstream ss(normalized);
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    QK_RETURN_IF_NOT(used == item.size() && !item.empty() && v > 0, StatusCode::kInvalidArgument,
                     "{} '{}' is not a size (N or HxW, positive)", what, text);
    QK_RETURN_IF_NOT(v <= kMaxImageSide, StatusCode::kInvalidArgument,
                     "{} '{}': {} pixels is larger than the limit of {} per side (kMaxImageSide)",
                     what, text, v, kMaxImageSide);
    out.push_back(v);
  }
  QK_RETURN_IF_NOT(out.size() == 1 || out.size() == 2, StatusCode::kInvalidArgument,
                   "{} '{}' is not a size (N or HxW)", what, text);
  return out;
}

Status SetResize(const std::string& text, ImageOptions* o) {
  QK_ASSIGN_OR_RETURN(std::vector<int64_t> size, ParseSize(text, "resize"));
  o->resize_short = size.size() == 1 ? size[0] : 0;
  o->resize_hw = size.size() == 2 ? size : std::vector<int64_t>{};
  return Status();
}

Status SetCrop(const std::string& text, ImageOptions* o) {
  QK_ASSIGN_OR_RETURN(std::vector<int64_t> size, ParseSize(text, "center crop"));
  o->crop_hw = size.size() == 1 ? std::vector<int64_t>{size[0], size[0]} : size;
  return Status();
}

Status SetColor(const std::string& text, ImageOptions* o) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "rgb")
    o->color = ColorOrder::kRgb;
  else if (t == "bgr")
    o->color = ColorOrder::kBgr;
  else if (t == "gray" || t == "grey" || t == "l")
    o->color = ColorOrder::kGray;
  else
    return MakeStatus(StatusCode::kInvalidArgument, "color '{}' is not rgb, bgr or gray", text);
  return Status();
}

Status SetLayout(const std::string& text, ImageOptions* o) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "nchw")
    o->layout = Layout::kNchw;
  else if (t == "nhwc")
    o->layout = Layout::kNhwc;
  else
    return MakeStatus(StatusCode::kInvalidArgument, "layout '{}' is not nchw or nhwc", text);
  return Status();
}

Status SetScale(double value, ImageOptions* o) {
  QK_RETURN_IF_NOT(std::isfinite(value) && value >= std::numeric_limits<double>::min() &&
                       value <= kMaxPixelScale,
                   StatusCode::kInvalidArgument,
                   "scale {:g} is out of range: expected a number in (0, {:g}]", value,
                   kMaxPixelScale);
  o->scale = value;
  return Status();
}

Result<ImageOptions> ParseImageOptions(const ImageOptionsText& text) {
  ImageOptions o;
  if (!text.resize.empty()) QK_RETURN_IF_ERROR(SetResize(text.resize, &o));
  if (!text.center_crop.empty()) QK_RETURN_IF_ERROR(SetCrop(text.center_crop, &o));
  if (!text.color.empty()) QK_RETURN_IF_ERROR(SetColor(text.color, &o));
  if (!text.layout.empty()) QK_RETURN_IF_ERROR(SetLayout(text.layout, &o));
  if (!text.mean.empty()) {
    QK_ASSIGN_OR_RETURN(o.mean, ParseFloatList(text.mean, "--mean"));
  }
  if (!text.std.empty()) {
    QK_ASSIGN_OR_RETURN(o.std, ParseFloatList(text.std, "--std"));
  }
  if (text.scale) QK_RETURN_IF_ERROR(SetScale(*text.scale, &o).WithContext("--scale"));
  return o;
}

Result<std::vector<double>> ParseFloatList(const std::string& text, const std::string& what) {
  std::vector<double> out;
  QK_RETURN_IF_NOT(!text.empty() && text.back() != ',', StatusCode::kInvalidArgument,
                   "{} '{}' is not a comma-separated list of numbers", what, text);
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (...) {
      used = 0;
    }
    QK_RETURN_IF_NOT(used == item.size() && !item.empty() && std::isfinite(v),
                     StatusCode::kInvalidArgument,
                     "{} '{}' is not a comma-separated list of numbers", what, text);
    out.push_back(v);
  }
  QK_RETURN_IF_NOT(!out.empty(), StatusCode::kInvalidArgument, "{} is empty", what);
  return out;
}

namespace {

bool IsImageFile(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

// Everything resolved against the model input: what one sample looks like.
struct Plan {
  ImageOptions options;  // color and layout resolved
  int64_t channels = 3;
  int64_t height = -1, width = -1;  // model's (or -1: taken from the first image)
  // The model's height/width is dynamic and no resize/crop fixes it: each image keeps its own
  // size, and images of different sizes go into different batches (data::ReadStackable).
  bool free_height = false, free_width = false;
  std::vector<float> mean, inv_std;  // per channel
  float scale = 1.0f / 255.0f;
};

class ImageFolderSource final : public Source {
 public:
  ImageFolderSource(std::vector<std::string> files, std::vector<int64_t> labels, InputSpec spec,
                    Plan plan, std::string description, std::string fingerprint)
      : files_(std::move(files)),
        labels_(std::move(labels)),
        spec_(std::move(spec)),
        plan_(std::move(plan)),
        description_(std::move(description)),
        fingerprint_(std::move(fingerprint)) {}

  int64_t num_samples() const override { return static_cast<int64_t>(files_.size()); }
  std::vector<std::string> input_names() const override { return {spec_.name}; }
  std::string Describe() const override { return description_; }
  std::string Fingerprint() const override { return fingerprint_; }

  Result<Batch> Read(int64_t start, int64_t count) const override {
    QK_RETURN_IF_NOT(start >= 0 && count > 0 && start + count <= num_samples(),
                     StatusCode::kInternal, "ImageFolderSource: samples [{}, {}) out of range",
                     start, start + count);
    const bool nchw = plan_.options.layout == Layout::kNchw;
    std::vector<Image> images;
    for (int64_t i = 0; i < count; ++i) {
      QK_ASSIGN_OR_RETURN(Image img, Load(files_[static_cast<size_t>(start + i)]));
      QK_RETURN_IF_NOT(
          images.empty() || (img.height == images[0].height && img.width == images[0].width),
          StatusCode::kInvalidArgument, "{}: image is {}x{}, the batch's first {}x{}",
          files_[static_cast<size_t>(start + i)], img.height, img.width, images[0].height,
          images[0].width);
      images.push_back(std::move(img));
    }
    const int64_t h = images[0].height, w = images[0].width;
    std::vector<int64_t> dims = nchw ? std::vector<int64_t>{count, plan_.channels, h, w}
                                     : std::vector<int64_t>{count, h, w, plan_.channels};
    ir::Tensor out(ir::DType::kFloat, dims);
    float* dst = out.mutable_data_as<float>();
    const int64_t per = plan_.channels * h * w;
    for (int64_t i = 0; i < count; ++i) Convert(images[static_cast<size_t>(i)], dst + i * per);
    Batch b;
    b.size = count;
    b.inputs.emplace_back(spec_.name, std::move(out));
    if (!labels_.empty()) {
      std::vector<int64_t> l(labels_.begin() + start, labels_.begin() + start + count);
      b.labels = ir::Tensor::FromVector<int64_t>(ir::DType::kInt64, {count}, l);
    }
    return b;
  }

  // Decodes and geometrically transforms one image; errors name the file.
  Result<Image> Load(const std::string& file) const {
    QK_ASSIGN_OR_RETURN(Image img, DecodeImage(file));
    if (plan_.channels == 3 && img.channels == 1) {
      return MakeStatus(
          StatusCode::kInvalidArgument,
          "{}: grayscale image but input '{}' takes 3 channels ({}); convert the images "
          "to RGB or feed a 1-channel model with color gray",
          file, spec_.name, plan_.options.color == ColorOrder::kBgr ? "bgr" : "rgb");
    }
    if (plan_.channels == 1) img = ToGray(img);
    const ImageOptions& o = plan_.options;
    int64_t h = img.height, w = img.width;
    if (o.resize_short > 0) {
      ShorterSideSize(img.height, img.width, o.resize_short, &h, &w);
    } else if (!o.resize_hw.empty()) {
      h = o.resize_hw[0];
      w = o.resize_hw[1];
    }
    // A long thin image resized by its short side grows with its aspect ratio: bounded like a
    // decode.
    QK_RETURN_IF_NOT(h * w <= kMaxResizedPixels, StatusCode::kResourceExhausted,
                     "{}: {}x{} image resized to {}x{} pixels is too large (at most {} pixels)",
                     file, img.height, img.width, h, w, kMaxResizedPixels);
    if (o.resize_short > 0 || !o.resize_hw.empty()) img = ResizeBilinear(img, h, w);
    if (!o.crop_hw.empty()) {
      QK_RETURN_IF_NOT(
          img.height >= o.crop_hw[0] && img.width >= o.crop_hw[1], StatusCode::kInvalidArgument,
          "{}: image is {}x{} after resize, smaller than the center crop {}x{} (declare a "
          "larger resize)",
          file, img.height, img.width, o.crop_hw[0], o.crop_hw[1]);
      img = CenterCrop(img, o.crop_hw[0], o.crop_hw[1]);
    }
    if ((!plan_.free_height && img.height != plan_.height) ||
        (!plan_.free_width && img.width != plan_.width)) {
      const bool declared = o.resize_short > 0 || !o.resize_hw.empty() || !o.crop_hw.empty();
      return MakeStatus(
          StatusCode::kInvalidArgument, "{}: image is {}x{}{} but input '{}' takes {}x{}{}", file,
          img.height, img.width, declared ? " after resize/crop" : "", spec_.name, plan_.height,
          plan_.width,
          declared ? "" : " (declare --resize and/or --center-crop, or resize the images)");
    }
    return img;
  }

 private:
  void Convert(const Image& img, float* dst) const {
    const bool nchw = plan_.options.layout == Layout::kNchw;
    const bool bgr = plan_.options.color == ColorOrder::kBgr;
    const int64_t c_n = plan_.channels, hw = img.height * img.width;
    for (int64_t p = 0; p < hw; ++p) {
      for (int64_t c = 0; c < c_n; ++c) {
        const int64_t src_c = bgr ? c_n - 1 - c : c;
        // ToTensor then Normalize: (x * scale - mean) / std, in float32 like torchvision.
        const float x =
            static_cast<float>(img.pixels[static_cast<size_t>(p * c_n + src_c)]) * plan_.scale;
        const float v =
            (x - plan_.mean[static_cast<size_t>(c)]) * plan_.inv_std[static_cast<size_t>(c)];
        dst[nchw ? c * hw + p : p * c_n + c] = v;
      }
    }
  }

  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  InputSpec spec_;
  Plan plan_;
  std::string description_;
  std::string fingerprint_;
};

Result<std::vector<float>> PerChannel(const std::vector<double>& v, int64_t channels,
                                      double fallback, const char* what) {
  if (v.empty())
    return std::vector<float>(static_cast<size_t>(channels), static_cast<float>(fallback));
  QK_RETURN_IF_NOT(v.size() == 1 || static_cast<int64_t>(v.size()) == channels,
                   StatusCode::kInvalidArgument,
                   "{} has {} values but the images have {} channel(s): give 1 or {}", what,
                   v.size(), channels, channels);
  std::vector<float> out;
  for (int64_t c = 0; c < channels; ++c)
    out.push_back(static_cast<float>(v[v.size() == 1 ? 0 : static_cast<size_t>(c)]));
  return out;
}

}  // namespace

Result<bool> internal::IsImageFolder(const std::string& dir) {
  QK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirectory(dir));
  const auto image = [](const std::string& name) { return IsImageFile(fs::path(name)); };
  for (const DirEntry& e : entries) {
    if (e.is_file && image(e.name)) return true;
  }
  for (const DirEntry& e : entries) {
    if (!e.is_directory) continue;
    QK_ASSIGN_OR_RETURN(std::vector<std::string> files, ListFilesRecursive(e.path, image));
    if (!files.empty()) return true;
  }
  return false;
}

Result<std::unique_ptr<Source>> internal::OpenImageFolder(const std::string& dir,
                                                          const InputSpec& spec,
                                                          const ImageOptions& options) {
  // Files: flat DIR/*.png, else ImageFolder classes.
  std::vector<std::string> files, classes;
  std::vector<int64_t> labels;
  std::error_code ec;
  std::vector<fs::path> subdirs;
  // Links are followed, loops refused by name (common/dir_walk.h).
  const auto image = [](const std::string& name) { return IsImageFile(fs::path(name)); };
  QK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirectory(dir));
  for (const DirEntry& e : entries) {
    if (e.is_file && image(e.name)) files.push_back(e.path);
    if (e.is_directory) subdirs.push_back(e.path);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::sort(subdirs.begin(), subdirs.end());
    for (const fs::path& sub : subdirs) {
      QK_ASSIGN_OR_RETURN(std::vector<std::string> in_class,
                          ListFilesRecursive(sub.string(), image));
      QK_RETURN_IF_NOT(
          !in_class.empty(), StatusCode::kInvalidArgument,
          "{}: class folder '{}' holds no .png/.jpg/.jpeg images (torchvision's ImageFolder "
          "refuses it too; remove it so the labels stay aligned)",
          dir, sub.filename().string());
      std::sort(in_class.begin(), in_class.end());
      for (std::string& f : in_class) {
        files.push_back(std::move(f));
        labels.push_back(static_cast<int64_t>(classes.size()));
      }
      classes.push_back(sub.filename().string());
    }
  }
  QK_RETURN_IF_NOT(!files.empty(), StatusCode::kInvalidArgument,
                   "{}: empty data directory (no .png/.jpg/.jpeg images, no class folders)", dir);

  // Resolve the declared preprocessing against the model input.
  QK_RETURN_IF_NOT(spec.dtype == ir::DType::kFloat, StatusCode::kInvalidArgument,
                   "{}: input '{}' takes {}, but image folders produce float32", dir, spec.name,
                   ir::DTypeName(spec.dtype));
  QK_RETURN_IF_NOT(spec.dims.empty() || spec.dims.size() == 4, StatusCode::kInvalidArgument,
                   "{}: input '{}' has rank {}, but images feed rank-4 inputs (NCHW or NHWC)", dir,
                   spec.name, spec.dims.size());
  Plan plan;
  plan.options = options;
  auto dim = [&](size_t i) { return spec.dims.empty() ? int64_t{-1} : spec.dims[i]; };
  if (plan.options.layout == Layout::kAuto) {
    const bool channels_last = (dim(3) == 1 || dim(3) == 3) && dim(1) != 1 && dim(1) != 3;
    plan.options.layout = channels_last ? Layout::kNhwc : Layout::kNchw;
  }
  const bool nchw = plan.options.layout == Layout::kNchw;
  const int64_t model_c = nchw ? dim(1) : dim(3);
  if (plan.options.color == ColorOrder::kAuto)
    plan.options.color = model_c == 1 ? ColorOrder::kGray : ColorOrder::kRgb;
  plan.channels = plan.options.color == ColorOrder::kGray ? 1 : 3;
  QK_RETURN_IF_NOT(model_c < 0 || model_c == plan.channels, StatusCode::kInvalidArgument,
                   "{}: input '{}' takes {} channel(s) ({}) but color {} gives {}", dir, spec.name,
                   model_c, nchw ? "NCHW" : "NHWC",
                   plan.options.color == ColorOrder::kGray ? "gray" : "rgb/bgr", plan.channels);
  plan.height = nchw ? dim(2) : dim(1);
  plan.width = nchw ? dim(3) : dim(2);
  plan.scale = static_cast<float>(plan.options.scale.value_or(1.0 / 255.0));
  // Errors name the folder and the input: a data config maps several.
  const std::string where = fmt::format("{}: input '{}'", dir, spec.name);
  auto mean = PerChannel(plan.options.mean, plan.channels, 0.0, "mean");
  if (!mean.ok()) return mean.status().WithContext(where);
  plan.mean = *mean;
  auto stdv = PerChannel(plan.options.std, plan.channels, 1.0, "std");
  if (!stdv.ok()) return stdv.status().WithContext(where);
  for (float s : *stdv) {
    QK_RETURN_IF_NOT(s != 0.0f && std::isfinite(s), StatusCode::kInvalidArgument,
                     "{}: std {} divides the pixels; it must be finite and nonzero", where, s);
    plan.inv_std.push_back(1.0f / s);
  }
  // A dynamic height/width takes the first image's size after resize/crop; the rest must match.
  // Decoding the first image now also fails fast on an unreadable file or a size mismatch.
  const ImageOptions& o = plan.options;
  // A shorter-side resize keeps the aspect ratio, so it does not fix the size either.
  const bool size_fixed = !o.resize_hw.empty() || !o.crop_hw.empty();
  plan.free_height = plan.height < 0 && !size_fixed;
  plan.free_width = plan.width < 0 && !size_fixed;
  if (plan.height < 0 || plan.width < 0) {
    int64_t h = 0, w = 0;
    if (!o.crop_hw.empty()) {
      h = o.crop_hw[0], w = o.crop_hw[1];
    } else {
      QK_ASSIGN_OR_RETURN(Image img, DecodeImage(files.front()));
      h = img.height, w = img.width;
      if (o.resize_short > 0) ShorterSideSize(img.height, img.width, o.resize_short, &h, &w);
      if (!o.resize_hw.empty()) h = o.resize_hw[0], w = o.resize_hw[1];
    }
    if (plan.height < 0) plan.height = h;
    if (plan.width < 0) plan.width = w;
  }
  QK_RETURN_IF_ERROR(
      ImageFolderSource({files.front()}, {}, spec, plan, "", "").Load(files.front()).status());
  // Fingerprint: relative paths, sizes, labels and the declared preprocessing (not the pixels:
  // hashing every image would cost a full decode pass before calibration starts).
  Sha256 hash;
  hash.Update(plan.options.Describe());
  for (size_t i = 0; i < files.size(); ++i) {
    hash.Update(fs::relative(files[i], dir, ec).string());
    hash.Update(std::to_string(fs::file_size(files[i], ec)));
    if (!labels.empty()) hash.Update(std::to_string(labels[i]));
  }
  std::string description =
      classes.empty()
          ? fmt::format("{} ({} images; {})", dir, files.size(), plan.options.Describe())
          : fmt::format("{} ({} images in {} classes; {})", dir, files.size(), classes.size(),
                        plan.options.Describe());
  return std::unique_ptr<Source>(new ImageFolderSource(std::move(files), std::move(labels), spec,
                                                       std::move(plan), std::move(description),
                                                       hash.HexDigest()));
}

}  // namespace quantkit::data
