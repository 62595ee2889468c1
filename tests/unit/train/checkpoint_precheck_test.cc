// CheckPickleLengths on hand-made pickles: what fits passes, a declared length or memo index past
// the record's end is refused naming the byte (the checkpoint_fuzzer's 1.8 GB BINUNICODE), and
// PrecheckCheckpointArchive refuses bytes that are not a zip archive.
#include "train/checkpoint_precheck.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace quantkit::train {
namespace {

std::vector<uint8_t> Bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

Status Check(const std::vector<uint8_t>& p) { return CheckPickleLengths(p.data(), p.size(), "data.pkl"); }

TEST(CheckPickleLengths, AcceptsWhatFits) {
  // PROTO 2, BINUNICODE "ab", BINPUT 0, BININT1 7, TUPLE2, STOP.
  EXPECT_TRUE(Check(Bytes(std::string("\x80\x02X\x02\x00\x00\x00" "abq\x00K\x07\x86.", 15))).ok());
  // GLOBAL's two lines, then SHORT_BINUNICODE of length 0.
  EXPECT_TRUE(Check(Bytes(std::string("ctorch\nTensor\n\x8c\x00.", 17))).ok());
  // An opcode the scanner does not know ends the scan (the unpickler refuses it itself).
  EXPECT_TRUE(Check(Bytes(std::string("\xff" "X\xff\xff\xff\x7f", 6))).ok());
}

TEST(CheckPickleLengths, RefusesALengthPastTheEnd) {
  // BINUNICODE declaring 0x6c000000 bytes (1.8 GB) in a 9-byte pickle.
  const Status s = Check(Bytes(std::string("\x80\x02X\x00\x00\x00\x6c" "a.", 9)));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("data.pkl"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1811939328 bytes at byte 2"), std::string::npos) << s.message();
  // BINBYTES8 and a length field cut short.
  EXPECT_FALSE(Check(Bytes(std::string("\x8e\x10\x00\x00\x00\x00\x00\x00\x00" "abc", 12))).ok());
  EXPECT_FALSE(Check(Bytes(std::string("X\x01\x00", 3))).ok());
}

TEST(CheckPickleLengths, RefusesAMemoIndexNoSlotCanHave) {
  // LONG_BINPUT 0x7fffffff in an 7-byte pickle.
  const Status s = Check(Bytes(std::string("N" "r\xff\xff\xff\x7f.", 7)));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("memo index 2147483647"), std::string::npos) << s.message();
  EXPECT_TRUE(Check(Bytes(std::string("Nq\x00h\x00.", 6))).ok());
  // An unterminated GLOBAL line.
  EXPECT_FALSE(Check(Bytes(std::string("ctorch\nTens", 11))).ok());
}

TEST(PrecheckCheckpointArchive, RefusesWhatIsNotAZipArchive) {
  const std::vector<uint8_t> garbage = Bytes("definitely not a zip archive");
  const Status s = PrecheckCheckpointArchive(garbage.data(), garbage.size(), "ckpt.pt");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ckpt.pt"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace quantkit::train
