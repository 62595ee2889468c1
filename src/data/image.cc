#include "data/image.h"

// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <cstdio>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstring>

#include "common/check.h"
#include "common/file_util.h"

namespace quantkit::data {
namespace {

// Decoded images larger than this are refused before allocating (a hostile header can claim
// 2^31 x 2^31 pixels).
constexpr uint64_t kMaxPixels = uint64_t{1} << 28;

Result<Image> DecodePng(const std::string& bytes, const std::string& origin) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    return MakeStatus(StatusCode::kInvalidModel, "{}: unreadable PNG: {}", origin, image.message);
  }
  const bool color = image.format & PNG_FORMAT_FLAG_COLOR;
  const bool alpha = image.format & PNG_FORMAT_FLAG_ALPHA;
  if (static_cast<uint64_t>(image.width) * image.height > kMaxPixels) {
    png_image_free(&image);
    return MakeStatus(StatusCode::kResourceExhausted,
                      "{}: PNG of {}x{} pixels is too large (at most {} pixels)", origin,
                      image.width, image.height, kMaxPixels);
  }
  // Read with alpha when the file has it, then drop it: PIL's convert('RGB') discards alpha
  // rather than compositing onto a background.
  image.format = color ? (alpha ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB)
                       : (alpha ? PNG_FORMAT_GA : PNG_FORMAT_GRAY);
  const int read_channels = static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(image.format));
  std::vector<uint8_t> raw(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, raw.data(), 0, nullptr)) {
    const std::string message = image.message;
    png_image_free(&image);
    return MakeStatus(StatusCode::kInvalidModel, "{}: corrupt PNG: {}", origin, message);
  }
  Image out;
  out.height = image.height;
  out.width = image.width;
  out.channels = color ? 3 : 1;
  if (!alpha) {
    out.pixels = std::move(raw);
    return out;
  }
  const size_t n = static_cast<size_t>(out.height * out.width);
  out.pixels.resize(n * static_cast<size_t>(out.channels));
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&out.pixels[i * static_cast<size_t>(out.channels)],
                &raw[i * static_cast<size_t>(read_channels)], static_cast<size_t>(out.channels));
  }
  return out;
}

// libjpeg reports fatal errors through error_exit, which must not return: jump back to the
// decoder with the message. Only C frames (libjpeg's) are skipped by the longjmp.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings are not fatal (PIL also accepts e.g. extraneous bytes before a marker), except a
// truncated file: libjpeg would pad it with gray, PIL refuses it ("image file is truncated").
void JpegWarning(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) JpegErrorExit(cinfo);
}

Result<Image> DecodeJpeg(const std::string& bytes, const std::string& origin) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  Image out;
  std::string failure;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegErrorExit;
  err.mgr.emit_message = JpegWarning;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return MakeStatus(StatusCode::kInvalidModel, "{}: corrupt JPEG: {}", origin, err.message);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  jpeg_read_header(&cinfo, TRUE);
  if (static_cast<uint64_t>(cinfo.image_width) * cinfo.image_height > kMaxPixels) {
    // Too large is exit 5, as for a PNG (docs/cli.md "Exit codes").
    const uint64_t width = cinfo.image_width, height = cinfo.image_height;
    jpeg_destroy_decompress(&cinfo);
    return MakeStatus(StatusCode::kResourceExhausted,
                      "{}: JPEG of {}x{} pixels is too large (at most {} pixels)", origin, width,
                      height, kMaxPixels);
  }
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    failure = "CMYK JPEGs are not supported (convert to RGB)";
  }
  if (!failure.empty()) {
    jpeg_destroy_decompress(&cinfo);
    return MakeStatus(StatusCode::kUnsupported, "{}: {}", origin, failure);
  }
  const bool gray = cinfo.jpeg_color_space == JCS_GRAYSCALE;
  cinfo.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  out.height = cinfo.output_height;
  out.width = cinfo.output_width;
  out.channels = cinfo.output_components;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * out.channels));
  const size_t stride = static_cast<size_t>(out.width * out.channels);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.pixels.data() + cinfo.output_scanline * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return out;
}

// ---- Pillow's Resample.c (BILINEAR), 8 bits per channel ----
constexpr int kPrecisionBits = 32 - 8 - 2;

double TriangleFilter(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

struct Coeffs {
  int ksize = 0;
  std::vector<int> bounds;  // per output pixel: first input index, count
  std::vector<int32_t> k;   // per output pixel: ksize fixed-point weights
};

Coeffs PrecomputeCoeffs(int64_t in_size, int64_t out_size) {
  constexpr double kSupport = 1.0;  // bilinear
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = kSupport * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<size_t>(out_size) * 2);
  c.k.assign(static_cast<size_t>(out_size * c.ksize), 0);
  std::vector<double> kk(static_cast<size_t>(c.ksize));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = static_cast<int>(in_size);
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      kk[static_cast<size_t>(x)] = TriangleFilter((x + xmin - center + 0.5) * ss);
      ww += kk[static_cast<size_t>(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? kk[static_cast<size_t>(x)] / ww : kk[static_cast<size_t>(x)];
      // normalize_coeffs_8bpc: round half away from zero into 22-bit fixed point.
      c.k[static_cast<size_t>(xx * c.ksize + x)] = static_cast<int32_t>(
          w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    c.bounds[static_cast<size_t>(xx * 2)] = xmin;
    c.bounds[static_cast<size_t>(xx * 2 + 1)] = xmax;
  }
  return c;
}

uint8_t Clip8(int64_t v) {
  const int64_t shifted = v >> kPrecisionBits;  // arithmetic shift, as Pillow's lookup table
  return static_cast<uint8_t>(std::clamp<int64_t>(shifted, 0, 255));
}

// One separable pass along an axis: `along_width` picks rows (horizontal) or columns.
Image ResamplePass(const Image& in, const Coeffs& c, int64_t out_size, bool along_width,
                   int64_t first_row, int64_t rows) {
  Image out;
  out.channels = in.channels;
  out.height = along_width ? rows : out_size;
  out.width = along_width ? out_size : in.width;
  out.pixels.resize(static_cast<size_t>(out.height * out.width * out.channels));
  const int64_t ch = in.channels;
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      const int64_t o = along_width ? x : y;
      const int xmin = c.bounds[static_cast<size_t>(o * 2)],
                n = c.bounds[static_cast<size_t>(o * 2 + 1)];
      const int32_t* k = &c.k[static_cast<size_t>(o * c.ksize)];
      for (int64_t b = 0; b < ch; ++b) {
        int64_t ss = int64_t{1} << (kPrecisionBits - 1);
        for (int i = 0; i < n; ++i) {
          const int64_t sy = along_width ? y + first_row : xmin + i;
          const int64_t sx = along_width ? xmin + i : x;
          ss +=
              static_cast<int64_t>(in.pixels[static_cast<size_t>((sy * in.width + sx) * ch + b)]) *
              k[i];
        }
        out.pixels[static_cast<size_t>((y * out.width + x) * ch + b)] = Clip8(ss);
      }
    }
  }
  return out;
}

}  // namespace

Result<Image> DecodeImageBytes(const std::string& bytes, const std::string& origin) {
  static const unsigned char kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return DecodePng(bytes, origin);
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xff &&
      static_cast<unsigned char>(bytes[1]) == 0xd8 &&
      static_cast<unsigned char>(bytes[2]) == 0xff) {
    return DecodeJpeg(bytes, origin);
  }
  return MakeStatus(StatusCode::kInvalidModel,
                    "{}: not a PNG or JPEG image ({} bytes, unknown signature)", origin,
                    bytes.size());
}

Result<Image> DecodeImage(const std::string& path) {
  QK_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return DecodeImageBytes(bytes, path);
}

Image ResizeBilinear(const Image& in, int64_t out_height, int64_t out_width) {
  const bool need_h = out_width != in.width, need_v = out_height != in.height;
  if (!need_h && !need_v) return in;
  const Coeffs horiz = PrecomputeCoeffs(in.width, out_width);
  Coeffs vert = PrecomputeCoeffs(in.height, out_height);
  // Pillow's horizontal pass only computes the rows the vertical pass will read.
  const int64_t first = vert.bounds[0];
  const int64_t last = vert.bounds[static_cast<size_t>(out_height * 2 - 2)] +
                       vert.bounds[static_cast<size_t>(out_height * 2 - 1)];
  if (!need_h) return ResamplePass(in, vert, out_height, false, 0, 0);
  for (int64_t i = 0; i < out_height; ++i)
    vert.bounds[static_cast<size_t>(i * 2)] -= static_cast<int>(first);
  Image temp = ResamplePass(in, horiz, out_width, true, first, last - first);
  if (!need_v) return temp;
  return ResamplePass(temp, vert, out_height, false, 0, 0);
}

Image CenterCrop(const Image& in, int64_t out_height, int64_t out_width) {
  // Python's round() is half-to-even, which nearbyint gives in the default rounding mode.
  const auto top = static_cast<int64_t>(std::nearbyint((in.height - out_height) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint((in.width - out_width) / 2.0));
  Image out;
  out.height = out_height;
  out.width = out_width;
  out.channels = in.channels;
  out.pixels.resize(static_cast<size_t>(out_height * out_width * in.channels));
  const size_t row = static_cast<size_t>(out_width * in.channels);
  for (int64_t y = 0; y < out_height; ++y) {
    std::memcpy(&out.pixels[static_cast<size_t>(y) * row],
                &in.pixels[static_cast<size_t>(((top + y) * in.width + left) * in.channels)], row);
  }
  return out;
}

Image ToGray(const Image& rgb) {
  if (rgb.channels == 1) return rgb;
  Image out;
  out.height = rgb.height;
  out.width = rgb.width;
  out.channels = 1;
  const size_t n = static_cast<size_t>(rgb.height * rgb.width);
  out.pixels.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = &rgb.pixels[i * 3];
    out.pixels[i] =
        static_cast<uint8_t>((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
  }
  return out;
}

void ShorterSideSize(int64_t h, int64_t w, int64_t size, int64_t* out_h, int64_t* out_w) {
  const int64_t shorter = std::min(h, w), longer = std::max(h, w);
  const auto new_long =
      static_cast<int64_t>(static_cast<double>(size * longer) / static_cast<double>(shorter));
  *out_h = w <= h ? new_long : size;
  *out_w = w <= h ? size : new_long;
}

}  // namespace quantkit::data
