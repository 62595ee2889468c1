// 8-bit images: PNG (libpng) and JPEG (libjpeg-turbo) decoding, and the pixel operations of the
// declared preprocessing that must match torchvision's PIL pipeline (docs/data-sources.md):
//
//   ResizeBilinear  == PIL Image.resize(size, BILINEAR) (what transforms.Resize does on a PIL
//                      image): separable triangle filter widened by the scale when shrinking
//                      (antialias), 22-bit fixed-point weights, horizontal pass first, each pass
//                      rounded and clamped to uint8. A port of Pillow's Resample.c, so results
//                      are bit-identical to PIL on the same decoded pixels.
//   CenterCrop      == transforms.CenterCrop: offsets round((in - out) / 2) half-to-even.
//   ToGray          == PIL convert('L'): ITU-R 601-2 luma, (R*19595 + G*38470 + B*7471 + 0x8000)
//   >> 16.
//
// Errors are one line that starts with the file name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quantkit/status.h"

namespace quantkit::data {

// Interleaved HWC uint8 pixels; channels 1 (gray) or 3 (RGB). Alpha is dropped on decode (as
// PIL's convert('RGB') does).
struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// Decides PNG or JPEG by the file's magic bytes, not its extension.
Result<Image> DecodeImage(const std::string& path);
Result<Image> DecodeImageBytes(const std::string& bytes, const std::string& origin);

Image ResizeBilinear(const Image& in, int64_t out_height, int64_t out_width);
// Requires out_height <= in.height and out_width <= in.width.
Image CenterCrop(const Image& in, int64_t out_height, int64_t out_width);
Image ToGray(const Image& rgb);

// torchvision Resize(int) on an h x w image: the shorter side becomes `size`, the longer
// int(size * long / short).
void ShorterSideSize(int64_t h, int64_t w, int64_t size, int64_t* out_h, int64_t* out_w);

}  // namespace quantkit::data
