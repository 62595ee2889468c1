// IDX reader: the real Fashion-MNIST files of Debian's dataset-fashion-mnist, and corrupted
// copies written to a temporary directory (each negative test names the check it exercises).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/idx.h"

namespace quantkit::data {
namespace {

namespace fs = std::filesystem;

const std::string kDir = kFashionMnistDefaultDir;

bool HaveDataset() { return fs::exists(FashionMnistLabelsPath(kDir, "t10k")); }

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A per-test scratch directory, removed afterwards.
class IdxFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("qk_idx_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteRaw(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return path;
  }
  std::string WriteGz(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return path;
  }

  fs::path dir_;
};

// A valid unsigned-byte IDX image with the given dims, values 0, 1, 2, ...
std::vector<uint8_t> MakeIdx(const std::vector<uint32_t>& dims) {
  std::vector<uint8_t> bytes = {0, 0, kIdxTypeUnsignedByte, static_cast<uint8_t>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(d >> shift));
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<uint8_t>(i));
  return bytes;
}

// Every failure is one line that starts with the file path.
void ExpectFileError(const Status& status, StatusCode code, const std::string& path,
                     const std::string& needle) {
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_EQ(status.message().rfind(path + ": ", 0), 0u) << status.message();
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(needle), std::string::npos) << status.message();
}

TEST(IdxReal, ReadsFashionMnistTrainAndTest) {
  if (!HaveDataset()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto images = ReadIdx(FashionMnistImagesPath(kDir, "train"));
  ASSERT_TRUE(images.ok()) << images.status().ToString();
  EXPECT_EQ(images->dims, (std::vector<int64_t>{60000, 28, 28}));
  int64_t sum = 0;  // first image's pixel sum, from qkdev/zoo/data.py
  for (int i = 0; i < 28 * 28; ++i) sum += images->values[i];
  EXPECT_EQ(sum, 76247);

  auto labels = ReadIdx(FashionMnistLabelsPath(kDir, "t10k"));
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  EXPECT_EQ(labels->dims, (std::vector<int64_t>{10000}));
  const std::vector<uint8_t> first(labels->values.begin(), labels->values.begin() + 10);
  EXPECT_EQ(first, (std::vector<uint8_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
}

TEST(IdxReal, DatasetBatchesAreNchwFloatWithDeclaredPreprocessing) {
  if (!HaveDataset()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto ds =
      IdxImageDataset::Open(FashionMnistImagesPath(kDir, "train"),
                            FashionMnistLabelsPath(kDir, "train"), FashionMnistPreprocessing());
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->size(), 60000);
  EXPECT_EQ(ds->labels()[0], 9);

  auto images = ds->Images({0, 3});
  ASSERT_TRUE(images.ok());
  EXPECT_EQ(images->dtype(), ir::DType::kFloat);
  EXPECT_EQ(images->dims(), (std::vector<int64_t>{2, 1, 28, 28}));
  // Bit patterns of float32 values computed by qkdev/zoo/data.py: same ops, same order.
  const float* x = images->data_as<float>();
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  EXPECT_EQ(bits(x[14 * 28 + 14]), 1070390668u);  // pixel 217
  EXPECT_EQ(bits(x[5 * 28 + 20]), 3205365725u);   // pixel 23
  EXPECT_EQ(bits(x[0]), 3209652521u);             // pixel 0

  auto labels = ds->Labels({0, 1, 3});
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(labels->dtype(), ir::DType::kInt64);
  EXPECT_EQ(labels->data_as<int64_t>()[0], 9);
  EXPECT_EQ(labels->data_as<int64_t>()[2], 3);

  // Without this check a bad index would read past the pixel buffer.
  EXPECT_EQ(ds->Images({60000}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ds->Labels({-1}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(IdxFiles, ScaleOnlyPreprocessing) {
  const auto img = WriteRaw("img", MakeIdx({1, 1, 3}));
  const auto lab = WriteRaw("lab", MakeIdx({1}));
  auto ds = IdxImageDataset::Open(img, lab);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto x = ds->Images({0});
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(x->data_as<float>()[2], 2.0f / 255.0f);
}

TEST_F(IdxFiles, RawAndGzipReadTheSame) {
  const auto bytes = MakeIdx({2, 3, 4});
  auto raw = ReadIdx(WriteRaw("a.idx", bytes));
  auto gz = ReadIdx(WriteGz("a.idx.gz", bytes));
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  ASSERT_TRUE(gz.ok()) << gz.status().ToString();
  EXPECT_EQ(raw->dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(raw->values, gz->values);
}

TEST_F(IdxFiles, MissingFile) {
  const std::string path = (dir_ / "nope.gz").string();
  ExpectFileError(ReadIdx(path).status(), StatusCode::kNotFound, path, "no such file");
}

TEST_F(IdxFiles, BadMagic) {
  auto bytes = MakeIdx({4});
  bytes[0] = 0x1f;  // not gzip either: 1f 00 is no gzip magic
  const auto path = WriteRaw("bad_magic", bytes);
  ExpectFileError(ReadIdx(path).status(), StatusCode::kInvalidModel, path, "bad magic");
}

TEST_F(IdxFiles, UnsupportedElementType) {
  auto bytes = MakeIdx({4});
  bytes[2] = 0x0D;  // float32 IDX: valid format, not handled
  const auto path = WriteRaw("float", bytes);
  ExpectFileError(ReadIdx(path).status(), StatusCode::kUnsupported, path, "element type 0x0d");
}

TEST_F(IdxFiles, BadRank) {
  auto bytes = MakeIdx({4});
  bytes[3] = 0;  // rank 0 would make the header end where the payload should start
  const auto p0 = WriteRaw("rank0", bytes);
  ExpectFileError(ReadIdx(p0).status(), StatusCode::kInvalidModel, p0, "IDX rank 0");
  bytes[3] = 9;
  const auto p9 = WriteRaw("rank9", bytes);
  ExpectFileError(ReadIdx(p9).status(), StatusCode::kInvalidModel, p9, "IDX rank 9");
}

TEST_F(IdxFiles, DimsLargerThanRawFile) {
  auto bytes = MakeIdx({2, 3, 4});
  bytes.resize(bytes.size() - 5);  // without the size check we would read past the data
  const auto path = WriteRaw("short", bytes);
  ExpectFileError(ReadIdx(path).status(), StatusCode::kInvalidModel, path,
                  "dims [2, 3, 4] need 40 bytes");
}

TEST_F(IdxFiles, ForgedHugeDimsAreRejectedBeforeAllocating) {
  auto bytes = MakeIdx({1, 1, 1});
  for (int i = 4; i < 16; ++i) bytes[i] = 0xff;  // 3 x (2^32 - 1): an unchecked product would wrap
  const auto raw = WriteRaw("huge", bytes);
  ExpectFileError(ReadIdx(raw).status(), StatusCode::kInvalidModel, raw, "overflow");
  // dims [65536, 65536, 1]: a plausible 4 GiB that the raw file does not hold.
  auto big = MakeIdx({1, 1, 1});
  big[5] = big[9] = 0x01;
  big[7] = big[11] = 0x00;
  const auto raw2 = WriteRaw("big", big);
  ExpectFileError(ReadIdx(raw2).status(), StatusCode::kInvalidModel, raw2, "need 4294967312 bytes");
  // Compressed: the size is unknown up front, so the byte limit stops the allocation.
  const auto gz = WriteGz("big.gz", big);
  ExpectFileError(ReadIdx(gz).status(), StatusCode::kResourceExhausted, gz, "above the limit");
}

TEST_F(IdxFiles, GzipPayloadShorterThanDims) {
  auto bytes = MakeIdx({10, 10});
  bytes.resize(bytes.size() - 30);  // a complete gzip stream holding fewer bytes than declared
  const auto path = WriteGz("short.gz", bytes);
  ExpectFileError(ReadIdx(path).status(), StatusCode::kInvalidModel, path, "70 of the 100 bytes");
}

TEST_F(IdxFiles, TrailingBytes) {
  auto bytes = MakeIdx({5});
  bytes.push_back(42);
  const auto raw = WriteRaw("trailing", bytes);
  ExpectFileError(ReadIdx(raw).status(), StatusCode::kInvalidModel, raw,
                  "need 13 bytes, the file has 14");
  const auto gz = WriteGz("trailing.gz", bytes);
  ExpectFileError(ReadIdx(gz).status(), StatusCode::kInvalidModel, gz, "trailing bytes");
}

TEST_F(IdxFiles, TruncatedRealGzip) {
  if (!HaveDataset()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto bytes = ReadBytes(FashionMnistLabelsPath(kDir, "t10k"));
  bytes.resize(bytes.size() / 2);
  const auto path = WriteRaw("t10k-labels-cut.gz", bytes);
  ExpectFileError(ReadIdx(path).status(), StatusCode::kInvalidModel, path, "truncated gzip stream");
}

TEST_F(IdxFiles, CorruptGzipCrc) {
  const auto good = WriteGz("good.gz", MakeIdx({64}));
  auto bytes = ReadBytes(good);
  bytes[bytes.size() - 8] ^=
      0xff;  // first byte of the CRC-32 trailer: caught only by reading to the end
  const auto path = WriteRaw("crc.gz", bytes);
  ExpectFileError(ReadIdx(path).status(), StatusCode::kInvalidModel, path, "corrupt gzip stream");
}

// Failure injection: a gzip file cut at every offset must fail cleanly (never crash, never OK).
TEST_F(IdxFiles, GzipCutAtEveryOffset) {
  const auto good = WriteGz("good.gz", MakeIdx({3, 4, 5}));
  const auto bytes = ReadBytes(good);
  ASSERT_TRUE(ReadIdx(good).ok());
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    const auto path = WriteRaw("cut.gz", std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut));
    const Status status = ReadIdx(path).status();
    EXPECT_FALSE(status.ok()) << "cut at " << cut;
    EXPECT_EQ(status.message().rfind(path + ": ", 0), 0u) << status.message();
  }
}

TEST_F(IdxFiles, DatasetRejectsMismatchedFiles) {
  const auto img = WriteRaw("img", MakeIdx({3, 2, 2}));
  const auto lab = WriteRaw("lab", MakeIdx({4}));
  ExpectFileError(IdxImageDataset::Open(img, lab).status(), StatusCode::kInvalidModel, lab,
                  "4 labels for 3 images");
  // Swapped files: ranks are checked, so labels are never read as pixels.
  ExpectFileError(IdxImageDataset::Open(lab, img).status(), StatusCode::kInvalidModel, lab,
                  "expected rank 3");
}

TEST_F(IdxFiles, DatasetRejectsBadPreprocessing) {
  const auto img = WriteRaw("img", MakeIdx({1, 2, 2}));
  const auto lab = WriteRaw("lab", MakeIdx({1}));
  EXPECT_EQ(IdxImageDataset::Open(img, lab, Preprocessing{255.0f, {0.5f}, {0.0f}}).status().code(),
            StatusCode::kInvalidArgument);  // std 0 would divide by zero
  EXPECT_EQ(IdxImageDataset::Open(img, lab, Preprocessing{255.0f, {0.5f, 0.5f}, {1.0f, 1.0f}})
                .status()
                .code(),
            StatusCode::kInvalidArgument);  // two channels of statistics for one channel
  EXPECT_EQ(IdxImageDataset::Open(img, lab, Preprocessing{0.0f, {}, {}}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantkit::data
