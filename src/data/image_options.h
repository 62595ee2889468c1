// Declared preprocessing for image-folder sources, applied identically by calibrate, eval and
// every later consumer of a Source. Given as CLI options (tools/quantkit/cli_util.h
// AddImageOptions) or per input in a JSON data config (docs/data-sources.md).
//
// Order, matching torchvision's Resize -> CenterCrop -> ToTensor -> Normalize on a PIL image:
//   decode (alpha dropped) -> color (gray: PIL convert('L')) -> resize (PIL bilinear, antialias)
//   -> center crop -> float32 value = (pixel * scale - mean[c]) / std[c] -> layout NCHW or NHWC.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "quantkit/status.h"

namespace quantkit::data {

enum class ColorOrder { kAuto, kRgb, kBgr, kGray };
enum class Layout { kAuto, kNchw, kNhwc };

struct ImageOptions {
  // Resize: shorter side to `resize_short` (torchvision Resize(int)) or exactly resize_hw = {h, w}
  // (Resize((h, w))). Neither: images must already have the size the model takes.
  int64_t resize_short = 0;
  std::vector<int64_t> resize_hw;
  std::vector<int64_t> crop_hw;          // {h, w}: center crop after the resize
  ColorOrder color = ColorOrder::kAuto;  // auto: gray for a 1-channel input, else rgb
  Layout layout = Layout::kAuto;         // auto: NHWC when only the last dim can be channels
  std::optional<double> scale;           // default 1/255 (ToTensor)
  std::vector<double> mean, std;         // one value, or one per channel; default 0 and 1

  // True when anything was declared (used to refuse options that a source would ignore).
  bool declared() const;
  // "resize 256, center crop 224x224, rgb, NCHW, scale 0.00392157, mean [...], std [...]"
  std::string Describe() const;
};

// "256" -> {256}; "224x200" or "224,200" -> {224, 200} (height x width).
Result<std::vector<int64_t>> ParseSize(const std::string& text, const std::string& what);
// Applies textual option values (as the CLI and the JSON config give them) to `options`.
Status SetResize(const std::string& text, ImageOptions* options);
Status SetCrop(const std::string& text, ImageOptions* options);
Status SetColor(const std::string& text, ImageOptions* options);
Status SetLayout(const std::string& text, ImageOptions* options);
// The pixel scale's bounds: (0, kMaxPixelScale], a normal double (1e-400 would read as 0: blank
// images).
inline constexpr double kMaxPixelScale = 1e6;
Status SetScale(double value, ImageOptions* options);
// "0.485,0.456,0.406" (also used for --std)
Result<std::vector<double>> ParseFloatList(const std::string& text, const std::string& what);

}  // namespace quantkit::data
