// .npz archives are streamed (issue #13 item 3): rows come out of the member's decompression
// stream, in any order, without reading the whole member; headers are checked against the
// declared size; dtype and shape mismatches are refused (item 9).
#include <gtest/gtest.h>
#include <zip.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/source.h"

namespace quantkit::data {
namespace {

// A version-1.0 .npy image of float32 (or float64) rows [n, 1, 2, 2] with value = index.
std::string Npy(int64_t n, bool f64 = false) {
  std::string header = std::string("{'descr': '") + (f64 ? "<f8" : "<f4") +
                       "', 'fortran_order': False, 'shape': (" + std::to_string(n) +
                       ", 1, 2, 2), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size());
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (int64_t i = 0; i < n * 4; ++i) {
    if (f64) {
      const double v = static_cast<double>(i);
      out.append(reinterpret_cast<const char*>(&v), sizeof(v));
    } else {
      const float v = static_cast<float>(i);
      out.append(reinterpret_cast<const char*>(&v), sizeof(v));
    }
  }
  return out;
}

class NpzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "qk_npz_XXXXXX";
    ASSERT_NE(mkdtemp(&templ[0]), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes an archive with the given members; `store` keeps them uncompressed.
  std::string Archive(const std::vector<std::pair<std::string, std::string>>& members, bool store) {
    const std::string path = dir_ + "/data.npz";
    int err = 0;
    zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
    EXPECT_NE(z, nullptr);
    for (const auto& [name, bytes] : members) {
      keep_.push_back(bytes);
      zip_source_t* src = zip_source_buffer(z, keep_.back().data(), keep_.back().size(), 0);
      const zip_int64_t idx = zip_file_add(z, name.c_str(), src, ZIP_FL_OVERWRITE);
      EXPECT_GE(idx, 0);
      zip_set_file_compression(z, static_cast<zip_uint64_t>(idx),
                               store ? ZIP_CM_STORE : ZIP_CM_DEFLATE, 1);
    }
    EXPECT_EQ(zip_close(z), 0);
    return path;
  }

  std::string dir_;
  std::vector<std::string> keep_;
};

const InputSpec kInput{"x", ir::DType::kFloat, {-1, 1, 2, 2}};

TEST_F(NpzTest, RowsComeOutRightInAnyOrder) {
  for (const bool store : {true, false}) {
    const std::string path = Archive({{"x.npy", Npy(50)}}, store);
    auto source = OpenSource(path, {kInput});
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    ASSERT_EQ((*source)->num_samples(), 50);
    // Forward, then backwards (reopens the member), then a skip ahead.
    for (const auto& [start, count] :
         std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 7}, {1, 2}, {40, 10}}) {
      auto batch = (*source)->Read(start, count);
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      const ir::Tensor& t = batch->inputs.front().second;
      ASSERT_EQ(t.dims(), (std::vector<int64_t>{count, 1, 2, 2}));
      for (int64_t i = 0; i < count * 4; ++i) {
        ASSERT_EQ(t.data_as<float>()[i], static_cast<float>(start * 4 + i)) << "store " << store;
      }
    }
  }
}

TEST_F(NpzTest, HeadersThatLieAndWrongDtypesAreRefused) {
  std::string lying = Npy(10);
  lying.resize(lying.size() - 4);  // the header declares 10 rows, the member holds less
  auto bad = OpenSource(Archive({{"x.npy", lying}}, /*store=*/false), {kInput});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("data.npz:x.npy"), std::string::npos)
      << bad.status().message();
  auto f64 = OpenSource(Archive({{"x.npy", Npy(4, /*f64=*/true)}}, /*store=*/true), {kInput});
  ASSERT_FALSE(f64.ok());
  EXPECT_NE(f64.status().message().find("expects float but the data is double"), std::string::npos)
      << f64.status().message();
  auto missing = OpenSource(Archive({{"y.npy", Npy(4)}, {"z.npy", Npy(4)}}, true), {kInput});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no member 'x.npy'"), std::string::npos);
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Issue #48: a wrong CRC-32 and a duplicated member name were accepted silently, and a member named
// neither after the input nor arr_0 (np.savez's positional name) fed the only input.
TEST_F(NpzTest, DamagedDuplicatedOrUnnamedMembersAreRefused) {
  for (const bool store : {true, false}) {
    SCOPED_TRACE(store ? "stored" : "deflated");
    const std::string path = Archive({{"x.npy", Npy(50)}}, store);
    std::string bytes = FileBytes(path);
    // The central directory's CRC-32 of the one member: bytes 16..19 after its signature.
    const size_t central = bytes.find(std::string("PK\x01\x02", 4));
    ASSERT_NE(central, std::string::npos);
    bytes[central + 16] = static_cast<char>(bytes[central + 16] ^ 0x5a);
    Overwrite(path, bytes);
    auto crc = OpenSource(path, {kInput});
    ASSERT_FALSE(crc.ok()) << "a wrong CRC-32 was accepted";
    EXPECT_NE(crc.status().message().find("data.npz:x.npy"), std::string::npos)
        << crc.status().message();
  }
  {
    // Two members, then the second renamed to the first's name in both of its headers.
    const std::string path = Archive({{"x.npy", Npy(4)}, {"y.npy", Npy(4)}}, true);
    std::string bytes = FileBytes(path);
    for (size_t at = bytes.find("y.npy"); at != std::string::npos; at = bytes.find("y.npy", at)) {
      bytes[at] = 'x';
    }
    Overwrite(path, bytes);
    auto dup = OpenSource(path, {kInput});
    ASSERT_FALSE(dup.ok()) << "a duplicated member was accepted";
    EXPECT_NE(dup.status().message().find("a second member of that name"), std::string::npos)
        << dup.status().message();
  }
  auto foo = OpenSource(Archive({{"foo.npy", Npy(4)}}, true), {kInput});
  ASSERT_FALSE(foo.ok()) << "member 'foo' fed input 'x'";
  EXPECT_NE(foo.status().message().find("foo"), std::string::npos) << foo.status().message();
  auto positional = OpenSource(Archive({{"arr_0.npy", Npy(4)}}, true), {kInput});
  ASSERT_TRUE(positional.ok()) << positional.status().ToString();
  EXPECT_EQ((*positional)->num_samples(), 4);
}

}  // namespace
}  // namespace quantkit::data
