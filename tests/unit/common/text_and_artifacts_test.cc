// common/text.h (escaping, close matches) and common/artifact_set.h (all-or-nothing outputs,
// one writer per directory): issue #13 items 5, 6 and 7 at the lowest layer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/artifact_set.h"
#include "common/file_checks.h"
#include "common/file_util.h"
#include "common/text.h"
#include "quantkit/cancel.h"

namespace quantkit {
namespace {

TEST(EscapeControl, ControlBytesBecomeVisibleAndTheRestIsKept) {
  EXPECT_EQ(EscapeControl("conv1/Relu:0"), "conv1/Relu:0");
  EXPECT_EQ(EscapeControl("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(EscapeControl("line\nforged\r\t"), "line\\nforged\\r\\t");
  EXPECT_EQ(EscapeControl(std::string("nul\0del\x7f", 8)), "nul\\x00del\\x7f");
  EXPECT_EQ(EscapeControl("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 stays readable
}

TEST(XmlEscape, MarkupAndControlBytesCannotEscapeTheSvgText) {
  EXPECT_EQ(XmlEscape("conv1/Relu:0"), "conv1/Relu:0");
  EXPECT_EQ(XmlEscape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
  EXPECT_EQ(XmlEscape("x\x1b\n</text><script>"), "x\\x1b\\n&lt;/text&gt;&lt;script&gt;");
}

TEST(ClosestNames, TyposAndSubstringsMatchUnrelatedNamesDoNot) {
  const std::vector<std::string> names{"/head/Softmax", "conv1", "Relu", "Conv", "/layer1/Add"};
  EXPECT_EQ(ClosestNames("Softmax", names).front(), "/head/Softmax");
  EXPECT_EQ(ClosestNames("Rellu", names).front(), "Relu");
  EXPECT_TRUE(ClosestNames("zzzzzzzzzzzz", names).empty());
  EXPECT_EQ(DidYouMean("zzzzzzzzzzzz", names), "");
  EXPECT_EQ(DidYouMean("conv", {"conv1"}), "; did you mean 'conv1'?");
}

// A name with no close match still learns what exists (the issue's `--exclude` that listed
// nothing): distinct names in their order, the first five, and the count.
TEST(ClosestNames, NothingCloseListsWhatExists) {
  const std::vector<std::string> ops{"Conv", "Relu", "Conv", "Relu", "Gemm"};
  EXPECT_EQ(DidYouMean("zzzzzzzzzzzz", ops, "op types"),
            "; no close match among the 3 op types: 'Conv', 'Relu', 'Gemm'");
  const std::vector<std::string> many{"a1", "b2", "c3", "d4", "e5", "f6", "g7"};
  EXPECT_EQ(DidYouMean("zzzzzzzzzzzz", many, "tensors"),
            "; no close match among the 7 tensors: 'a1', 'b2', 'c3', 'd4', 'e5', ... (7 in all)");
  EXPECT_EQ(DidYouMean("zzzzzzzzzzzz", {}, "tensors"), "; there are no tensors");
  // Listed names are escaped like every other name from a file.
  EXPECT_EQ(ListSome({"a\x1b[2J"}), "'a\\x1b[2J'");
}

class ArtifactSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "qk_artifacts_XXXXXX";
    ASSERT_NE(mkdtemp(&templ[0]), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  size_t Entries() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) n += e.path().empty() ? 0 : 1;
    return n;
  }
  std::string dir_;
};

TEST_F(ArtifactSetTest, NothingReachesTheDirectoryUntilCommit) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/a.txt", "old a").ok());
  {
    auto set = ArtifactSet::Open(dir_, {"a.txt", "b.txt"});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_TRUE(WriteFileAtomic((*set)->Stage("a.txt"), "new a").ok());
    ASSERT_TRUE(WriteFileAtomic((*set)->Stage("b.txt"), "new b").ok());
    EXPECT_EQ(ReadFileToString(dir_ + "/a.txt").value(), "old a");
    auto written = (*set)->Commit();
    ASSERT_TRUE(written.ok());
    EXPECT_EQ(written->size(), 2u);
  }
  EXPECT_EQ(ReadFileToString(dir_ + "/a.txt").value(), "new a");
  EXPECT_EQ(ReadFileToString(dir_ + "/b.txt").value(), "new b");
  EXPECT_EQ(Entries(), 2u) << "the staging directory must be gone";
}

TEST_F(ArtifactSetTest, AnUncommittedSetLeavesNothingBehind) {
  {
    auto set = ArtifactSet::Open(dir_, {"a.txt"});
    ASSERT_TRUE(set.ok());
    ASSERT_TRUE(WriteFileAtomic((*set)->Stage("a.txt"), "partial").ok());
  }  // a failed run: destroyed without Commit
  EXPECT_EQ(Entries(), 0u);
}

// Ctrl-C in Python (quantkit/cancel.h): a cancel that arrives after the files are staged still
// writes nothing, and the status says it was cancelled.
TEST_F(ArtifactSetTest, ACancelledRunCommitsNothing) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/a.txt", "old a").ok());
  {
    auto set = ArtifactSet::Open(dir_, {"a.txt"});
    ASSERT_TRUE(set.ok());
    ASSERT_TRUE(WriteFileAtomic((*set)->Stage("a.txt"), "new a").ok());
    RequestCancel();
    auto written = (*set)->Commit();
    ClearCancel();
    ASSERT_FALSE(written.ok());
    EXPECT_TRUE(IsCancelled(written.status())) << written.status().ToString();
  }
  EXPECT_EQ(ReadFileToString(dir_ + "/a.txt").value(), "old a");
  EXPECT_EQ(Entries(), 1u) << "the staging directory must be gone";
  EXPECT_TRUE(CheckCancelled().ok()) << "ClearCancel lets the next call run";
}

TEST_F(ArtifactSetTest, ASecondWriterIsRefusedWhileTheFirstHoldsTheDirectory) {
  auto first = ArtifactSet::Open(dir_, {"a.txt"});
  ASSERT_TRUE(first.ok());
  // flock locks are per open file description: a second Open in this process conflicts as a
  // second process would.
  auto second = ArtifactSet::Open(dir_, {"a.txt"});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kIoError);
  EXPECT_NE(second.status().message().find("another quantkit run"), std::string::npos);
  first->reset();
  EXPECT_TRUE(ArtifactSet::Open(dir_, {"a.txt"}).ok()) << "the lock dies with its holder";
}

TEST_F(ArtifactSetTest, ANonFileTargetFailsBeforeAnythingIsWritten) {
  std::filesystem::create_directories(dir_ + "/plan.json");
  auto set = ArtifactSet::Open(dir_, {"model.onnx", "plan.json"});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(set.status().message().find("plan.json: is a directory"), std::string::npos)
      << set.status().message();
  EXPECT_EQ(Entries(), 1u);
}

TEST(CheckRegularFile, SpecialFilesAreNamedWithoutOpeningThem) {
  std::string templ = ::testing::TempDir() + "qk_fifo_XXXXXX";
  ASSERT_NE(mkdtemp(&templ[0]), nullptr);
  const std::string fifo = templ + "/model.onnx";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  // Would block forever in open() without the check.
  const Status st = CheckRegularFile(fifo);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), fifo + ": is a FIFO, expected a regular file");
  EXPECT_FALSE(MappedFile::Open(fifo).ok());
  EXPECT_NE(CheckRegularFile(templ).message().find("a directory"), std::string::npos);
  EXPECT_EQ(CheckRegularFile(templ + "/missing").code(), StatusCode::kNotFound);
  std::filesystem::remove_all(templ);
}

}  // namespace
}  // namespace quantkit
