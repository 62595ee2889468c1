#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "data/npy.h"

namespace quantkit::data {
namespace {

// A .npy image with the given version, header dict text and payload (header padded with
// spaces and '\n' to a 64-byte boundary as numpy does).
std::string MakeNpy(int major, std::string dict, const std::string& payload) {
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t preamble = 8 + len_bytes;
  size_t total = preamble + dict.size() + 1;
  total = (total + 63) / 64 * 64;
  dict.append(total - preamble - dict.size() - 1, ' ');
  dict += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  return out + dict + payload;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

Result<ir::Tensor> Parse(const std::string& s) {
  return ParseNpy(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "t.npy");
}

TEST(Npy, ReadsFloat32COrderAllVersions) {
  const std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 5.0f, -6.5f};
  for (int major : {1, 2, 3}) {
    auto t = Parse(
        MakeNpy(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", Bytes(v)));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->dtype(), ir::DType::kFloat);
    EXPECT_EQ(t->dims(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(std::memcmp(t->data(), v.data(), 24), 0);
  }
}

TEST(Npy, TransposesFortranOrder) {
  // Column-major 2x3 [[1,2,3],[4,5,6]] is stored as 1,4,2,5,3,6.
  const std::vector<float> f = {1, 4, 2, 5, 3, 6};
  auto t =
      Parse(MakeNpy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", Bytes(f)));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto values = ToFloat32(*t);
  EXPECT_EQ(*values, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // 2x2x2 column-major: element (i,j,k) at i + 2j + 4k.
  std::vector<float> g(8);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k)
        g[static_cast<size_t>(i + 2 * j + 4 * k)] = static_cast<float>(100 * i + 10 * j + k);
  t = Parse(MakeNpy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2, 2), }", Bytes(g)));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*ToFloat32(*t), (std::vector<float>{0, 1, 10, 11, 100, 101, 110, 111}));
}

TEST(Npy, ConvertsOtherDtypesAndByteOrders) {
  auto t = Parse(MakeNpy(1, "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }",
                         std::string("\x01\x02\xff\xfe", 4)));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*ToFloat32(*t), (std::vector<float>{258, -2}));
  // float16: 1.0 = 0x3c00, -2.0 = 0xc000, 65504 = 0x7bff, smallest subnormal 0x0001.
  const std::vector<uint16_t> h = {0x3c00, 0xc000, 0x7bff, 0x0001};
  t = Parse(MakeNpy(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }", Bytes(h)));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*ToFloat32(*t), (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}));
  const std::vector<double> d = {0.1, -1e300};
  t = Parse(
      MakeNpy(1, "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (2,)}", Bytes(d)));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*ToFloat32(*t))[0], 0.1f);
  EXPECT_TRUE(std::isinf((*ToFloat32(*t))[1]));
  t = Parse(MakeNpy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (), }", "\xc8"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->numel(), 1);
  EXPECT_EQ(*ToFloat32(*t), (std::vector<float>{200}));
  t = Parse(MakeNpy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (0, 5), }", ""));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->numel(), 0);
}

TEST(Npy, RejectsHostileFilesWithOneLineErrors) {
  const std::string good =
      MakeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'));
  auto expect_error = [](const std::string& bytes, const std::string& needle) {
    auto t = Parse(bytes);
    ASSERT_FALSE(t.ok()) << needle;
    EXPECT_EQ(t.status().message().rfind("t.npy: ", 0), 0u) << t.status().message();
    EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().message();
    EXPECT_EQ(t.status().message().find('\n'), std::string::npos);
  };
  expect_error("PK\x03\x04 not numpy", "bad magic");
  std::string v9 = good;
  v9[6] = 9;
  expect_error(v9, "version 9");
  std::string huge = good;
  huge[8] = '\xff';
  huge[9] = '\xff';
  expect_error(huge, "exceeds the file size");
  expect_error(
      MakeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", std::string(8, '\0')),
      "needs 12 data bytes");
  expect_error(
      MakeNpy(
          1,
          "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }",
          std::string(8, '\0')),
      "larger than the file");
  expect_error(MakeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", ""),
               "shape");
  expect_error(
      MakeNpy(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
      "unsupported dtype");
  expect_error(MakeNpy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                       std::string(4, '\0')),
               "structured");
  expect_error(MakeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                       std::string(4, '\0')),
               "unknown header key 'x'");
  expect_error(MakeNpy(1, "{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0')), "lacks");
  expect_error(MakeNpy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }", "\x07"),
               "bool");
  // Every truncation of a valid file is rejected.
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(Parse(good.substr(0, cut)).ok()) << "cut at " << cut;
  }
  auto missing = ReadNpy("/nonexistent/x.npy");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/x.npy"), std::string::npos);
}

TEST(Npy, WriteThenReadRoundTrips) {
  ir::Tensor t = ir::Tensor::FromVector<int32_t>(ir::DType::kInt32, {3, 1}, {7, -8, 9});
  const std::string path = ::testing::TempDir() + "/npy_roundtrip.npy";
  ASSERT_TRUE(WriteNpy(path, t).ok());
  auto back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->ContentEquals(t));
  ir::Tensor one = ir::Tensor::FromVector<float>(ir::DType::kFloat, {2}, {1.0f, 2.0f});
  ASSERT_TRUE(WriteNpy(path, one).ok());
  back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->ContentEquals(one));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace quantkit::data
