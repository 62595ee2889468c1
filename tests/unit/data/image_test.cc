// Image decoding errors, the PIL-compatible resize/crop/gray arithmetic, and sources over image
// folders and memory-mapped .npy files. (Agreement with torchvision itself on real files is
// tests/e2e/images.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "common/file_util.h"
#include "data/image.h"
#include "data/image_options_text.h"
#include "data/npy.h"
#include "data/source.h"

namespace quantkit::data {
namespace {
namespace fs = std::filesystem;

Image Make(int64_t h, int64_t w, int64_t c, std::vector<uint8_t> px) {
  Image im;
  im.height = h, im.width = w, im.channels = c, im.pixels = std::move(px);
  return im;
}

TEST(Image, RejectsNonImagesAndCorruptFilesNamingThem) {
  auto r = DecodeImageBytes("hello", "dir/a.jpg");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(r.status().message().find("dir/a.jpg: not a PNG or JPEG"), std::string::npos);
  const std::string png_sig("\x89PNG\r\n\x1a\n\0\0\0\0garbage", 20);
  r = DecodeImageBytes(png_sig, "b.png");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("b.png: unreadable PNG"), std::string::npos)
      << r.status().message();
  r = DecodeImageBytes(std::string("\xff\xd8\xff\xe0\0\x10JFIF\0", 11), "c.jpg");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("c.jpg: corrupt JPEG"), std::string::npos)
      << r.status().message();
}

TEST(Image, ResizeKeepsConstantImagesAndIdentity) {
  Image flat = Make(7, 9, 3, std::vector<uint8_t>(7 * 9 * 3, 200));
  for (auto [h, w] : {std::pair<int64_t, int64_t>{3, 4}, {7, 9}, {15, 2}, {20, 31}}) {
    Image out = ResizeBilinear(flat, h, w);
    ASSERT_EQ(out.height, h);
    ASSERT_EQ(out.width, w);
    for (uint8_t v : out.pixels) ASSERT_EQ(v, 200);  // weights sum to 1 in fixed point
  }
  Image ramp = Make(1, 4, 1, {0, 10, 20, 30});
  EXPECT_EQ(ResizeBilinear(ramp, 1, 4).pixels, ramp.pixels);
}

TEST(Image, HalvingAveragesPairsLikePil) {
  // PIL: a 1x4 -> 1x2 bilinear reduction has support 2 (antialias), so each output mixes the
  // pair around its center with weights 1/8, 3/8, 3/8, 1/8 (clipped at the border, renormalized).
  Image row = Make(1, 4, 1, {0, 80, 160, 240});
  Image out = ResizeBilinear(row, 1, 2);
  // out[0]: inputs 0..2 with weights 3/7,3/7,1/7 -> (0*3 + 80*3 + 160) / 7 = 57.14 -> 57
  // out[1]: inputs 1..3 with weights 1/7,3/7,3/7 -> (80 + 480 + 720) / 7 = 182.86 -> 183
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{57, 183}));
}

TEST(Image, CenterCropRoundsHalfToEvenLikePython) {
  std::vector<uint8_t> px(5);
  std::iota(px.begin(), px.end(), 0);
  // (5 - 2) / 2 = 1.5 -> round() = 2; (5 - 4) / 2 = 0.5 -> 0.
  EXPECT_EQ(CenterCrop(Make(1, 5, 1, px), 1, 2).pixels, (std::vector<uint8_t>{2, 3}));
  EXPECT_EQ(CenterCrop(Make(1, 5, 1, px), 1, 4).pixels, (std::vector<uint8_t>{0, 1, 2, 3}));
}

TEST(Image, GrayIsPilLuma) {
  Image rgb = Make(1, 2, 3, {255, 0, 0, 10, 200, 30});
  // (R*19595 + G*38470 + B*7471 + 0x8000) >> 16
  EXPECT_EQ(ToGray(rgb).pixels,
            (std::vector<uint8_t>{76, (10 * 19595 + 200 * 38470 + 30 * 7471 + 0x8000) >> 16}));
}

TEST(Image, ShorterSideMatchesTorchvision) {
  int64_t h = 0, w = 0;
  ShorterSideSize(375, 500, 256, &h, &w);  // int(256 * 500 / 375) = 341
  EXPECT_EQ(h, 256);
  EXPECT_EQ(w, 341);
  ShorterSideSize(500, 333, 224, &h, &w);  // int(224 * 500 / 333) = 336
  EXPECT_EQ(h, 336);
  EXPECT_EQ(w, 224);
}

TEST(ImageOptions, ParsesSizesAndRejectsJunk) {
  ImageOptions o;
  ASSERT_TRUE(SetResize("256", &o).ok());
  EXPECT_EQ(o.resize_short, 256);
  ASSERT_TRUE(SetResize("224x200", &o).ok());
  EXPECT_EQ(o.resize_short, 0);
  EXPECT_EQ(o.resize_hw, (std::vector<int64_t>{224, 200}));
  ASSERT_TRUE(SetCrop("224", &o).ok());
  EXPECT_EQ(o.crop_hw, (std::vector<int64_t>{224, 224}));
  EXPECT_FALSE(SetResize("0", &o).ok());
  EXPECT_FALSE(SetResize("12x", &o).ok());
  EXPECT_FALSE(SetColor("cmyk", &o).ok());
  EXPECT_FALSE(ParseFloatList("0.5,abc", "--mean").ok());
  EXPECT_TRUE(o.declared());
  EXPECT_FALSE(ImageOptions().declared());
}

// The one text parser the CLI and the public API share: every option lands in its field, an
// option not given keeps its default, and an error names the option.
TEST(ImageOptions, TheTextParserFillsEveryFieldAndNamesTheBadOption) {
  auto o = ParseImageOptions({"256", "224", "bgr", "nhwc", "0.485,0.456,0.406", "0.5", 1.0});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->resize_short, 256);
  EXPECT_EQ(o->crop_hw, (std::vector<int64_t>{224, 224}));
  EXPECT_EQ(o->color, ColorOrder::kBgr);
  EXPECT_EQ(o->layout, Layout::kNhwc);
  EXPECT_EQ(o->mean, (std::vector<double>{0.485, 0.456, 0.406}));
  EXPECT_EQ(o->std, std::vector<double>{0.5});
  EXPECT_EQ(o->scale, 1.0);
  auto none = ParseImageOptions({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->declared());
  auto bad = ParseImageOptions({"", "", "", "", "0.5,abc", "", std::nullopt});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--mean"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ParseImageOptions({"", "", "", "diagonal", "", "", std::nullopt}).ok());
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("qk_image_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

using MappedNpy = TempDir;

TEST_F(MappedNpy, ViewsTheFileAndReadsTheSameBatches) {
  std::vector<float> v(5 * 2 * 3);
  std::iota(v.begin(), v.end(), 0.0f);
  const std::string path = (dir_ / "x.npy").string();
  ASSERT_TRUE(WriteNpy(path, ir::Tensor::FromVector<float>(ir::DType::kFloat, {5, 2, 3}, v)).ok());
  std::shared_ptr<const MappedFile> mapping;
  auto t = MapNpy(path, &mapping);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_NE(mapping, nullptr);
  const auto* p = static_cast<const uint8_t*>(t->data());
  EXPECT_TRUE(p >= mapping->data() && p + t->nbytes() <= mapping->data() + mapping->size())
      << "no copy";
  EXPECT_TRUE(t->ContentEquals(*ReadNpy(path)));

  auto source = OpenSource(path, {InputSpec{"x", ir::DType::kFloat, {-1, 2, 3}}});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->num_samples(), 5);
  for (int pass = 0; pass < 2; ++pass) {  // pages released after the first pass read back the same
    auto b = (*source)->Read(1, 3);
    ASSERT_TRUE(b.ok());
    const float* f = b->inputs[0].second.data_as<float>();
    for (int i = 0; i < 18; ++i) ASSERT_EQ(f[i], v[static_cast<size_t>(6 + i)]);
  }
}

using ImageFolder = TempDir;

TEST_F(ImageFolder, EmptyFolderAndMultiInputModelsAreClearErrors) {
  InputSpec spec{"input", ir::DType::kFloat, {-1, 3, 8, 8}};
  ImageOptions o;
  ASSERT_TRUE(SetResize("8x8", &o).ok());
  auto r = OpenSource(dir_.string(), {spec}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ExitCodeFor(r.status().code()), 2);
  EXPECT_NE(r.status().message().find("empty data directory"), std::string::npos)
      << r.status().message();

  fs::create_directories(dir_ / "cls");
  std::ofstream(dir_ / "cls" / "a.png") << "not a png";
  r = OpenSource(dir_.string(), {spec, InputSpec{"other", ir::DType::kFloat, {-1, 4}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("JSON config"), std::string::npos) << r.status().message();
  r = OpenSource(dir_.string(), {spec});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find((dir_ / "cls" / "a.png").string()), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace quantkit::data
