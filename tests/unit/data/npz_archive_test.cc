// data/npz.h: whole-archive .npz reading and writing (QAT checkpoints). What WriteNpz writes reads
// back bit for bit; the reader refuses what it cannot bound or verify (compressed members, a
// declared size past the file, a bad checksum, a member that is not .npy, a name twice), each with
// one message naming the file and the member.
#include "data/npz.h"

#include <gtest/gtest.h>
#include <zip.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/npy.h"

namespace quantkit::data {
namespace {

class NpzArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "qk_npz_archive_XXXXXX";
    ASSERT_NE(mkdtemp(&templ[0]), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  static void Write(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  // An archive made with libzip directly: members (name, bytes), compressed or stored.
  std::string Archive(const std::vector<std::pair<std::string, std::string>>& members, int method) {
    const std::string path = Path("made.npz");
    int err = 0;
    zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
    EXPECT_NE(z, nullptr);
    for (const auto& [name, bytes] : members) {
      zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
      const zip_int64_t index = zip_file_add(z, name.c_str(), src, 0);
      EXPECT_GE(index, 0);
      zip_set_file_compression(z, static_cast<zip_uint64_t>(index), method, 1);
    }
    EXPECT_EQ(zip_close(z), 0);
    return path;
  }
  static std::string NpyBytes(const ir::Tensor& t) { return *EncodeNpy(t, "t"); }

  std::string dir_;
};

ir::Tensor Floats(std::vector<int64_t> dims, float first) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (n == 0)
    return ir::Tensor(ir::DType::kFloat, std::move(dims));  // FromVector would memcpy from nullptr
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = first + static_cast<float>(i) * 0.25f;
  return ir::Tensor::FromVector(ir::DType::kFloat, std::move(dims), v);
}

TEST_F(NpzArchiveTest, WhatIsWrittenReadsBackBitForBit) {
  const std::vector<NpzArray> arrays{
      {"param/conv.weight", Floats({2, 1, 3, 3}, -1.0f)},
      {"step", ir::Tensor::FromVector(ir::DType::kInt64, {}, std::vector<int64_t>{7})},
      {"value/best", ir::Tensor::FromVector(ir::DType::kDouble, {}, std::vector<double>{0.125})},
      {"empty", Floats({0, 3}, 0.0f)}};
  ASSERT_TRUE(WriteNpz(Path("a.npz"), arrays).ok());
  auto read = ReadNpz(Path("a.npz"));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ((*read)[i].name, arrays[i].name);
    EXPECT_EQ((*read)[i].tensor.dtype(), arrays[i].tensor.dtype());
    EXPECT_EQ((*read)[i].tensor.dims(), arrays[i].tensor.dims());
    ASSERT_EQ((*read)[i].tensor.nbytes(), arrays[i].tensor.nbytes());
    if (arrays[i].tensor.nbytes() == 0) continue;  // an empty tensor has no data pointer to compare
    EXPECT_EQ(0, std::memcmp((*read)[i].tensor.data(), arrays[i].tensor.data(),
                             arrays[i].tensor.nbytes()));
  }
  // Every member is stored (np.savez's layout), so the file is the data plus small headers.
  EXPECT_LT(Read(Path("a.npz")).size(), 2048u);
}

TEST_F(NpzArchiveTest, WritingANameTwiceFailsAndLeavesNoFile) {
  const Status s = WriteNpz(Path("b.npz"), {{"x", Floats({2}, 0)}, {"x", Floats({2}, 1)}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'x'"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(Path("b.npz")));
}

TEST_F(NpzArchiveTest, RefusesCompressedMembers) {
  const std::string path = Archive({{"x.npy", NpyBytes(Floats({64}, 0))}}, ZIP_CM_DEFLATE);
  auto r = ReadNpz(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("made.npz:x.npy: a compressed member"), std::string::npos)
      << r.status().ToString();
}

TEST_F(NpzArchiveTest, RefusesMembersThatAreNotNpyOrNamedTwice) {
  auto other = ReadNpz(Archive({{"notes.txt", "hello"}}, ZIP_CM_STORE));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("notes.txt: not an .npy member"), std::string::npos);
  // Two members of one name: libzip writes none such, so "y.npy" is renamed in the bytes (local
  // header and central directory).
  const std::string npy = NpyBytes(Floats({4}, 0));
  std::string bytes = Read(Archive({{"x.npy", npy}, {"y.npy", npy}}, ZIP_CM_STORE));
  for (size_t at = bytes.find("y.npy"); at != std::string::npos; at = bytes.find("y.npy", at))
    bytes[at] = 'x';
  Write(Path("twice.npz"), bytes);
  auto twice = ReadNpz(Path("twice.npz"));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("twice.npz"), std::string::npos)
      << twice.status().ToString();
}

TEST_F(NpzArchiveTest, RefusesABadChecksumAndABadNpy) {
  const std::string npy = NpyBytes(Floats({16}, 0));
  std::string bytes = Read(Archive({{"x.npy", npy}}, ZIP_CM_STORE));
  // Flip one data byte of the stored member (its last float): the CRC-32 no longer matches.
  const size_t at = bytes.find(npy.substr(npy.size() - 8));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 4] ^= 0x40;
  Write(Path("crc.npz"), bytes);
  auto crc = ReadNpz(Path("crc.npz"));
  ASSERT_FALSE(crc.ok());
  EXPECT_NE(crc.status().message().find("crc.npz:x.npy"), std::string::npos)
      << crc.status().ToString();

  auto garbage = ReadNpz(Archive({{"x.npy", "not an npy file at all"}}, ZIP_CM_STORE));
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("made.npz:x.npy"), std::string::npos)
      << garbage.status().ToString();
}

TEST_F(NpzArchiveTest, RefusesWhatIsNotAnArchive) {
  Write(Path("empty.npz"), "");
  Write(Path("text.npz"), "this is text, not a zip archive\n");
  for (const char* name : {"empty.npz", "text.npz"}) {
    auto r = ReadNpz(Path(name));
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().ToString();
  }
  EXPECT_EQ(ReadNpz(Path("missing.npz")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadNpz(dir_).status().code(), StatusCode::kInvalidArgument);  // a directory
}

}  // namespace
}  // namespace quantkit::data
