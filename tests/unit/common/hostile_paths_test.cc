// Issue #27 at the lowest layer: directory walks that cannot loop (common/dir_walk.h), cleanup on
// a fatal signal and of a dead run's staging (common/signal_cleanup.h, artifact_set.h), output
// targets checked before a pass (file_checks.h), and escaping of what is not UTF-8 (text.h).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/artifact_set.h"
#include "common/dir_walk.h"
#include "common/file_checks.h"
#include "common/file_util.h"
#include "common/signal_cleanup.h"
#include "common/text.h"

namespace quantkit {
namespace {

namespace fs = std::filesystem;

class HostilePaths : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "qk_paths_XXXXXX";
    ASSERT_NE(mkdtemp(&templ[0]), nullptr);
    dir_ = templ;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST(EscapeControlUtf8, BytesThatAreNotUtf8AreEscapedWellFormedTextIsKept) {
  EXPECT_EQ(EscapeControl("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(EscapeControl("\x80\xff"), "\\x80\\xff");           // stray bytes of a binary file
  EXPECT_EQ(EscapeControl("ab\xc3"), "ab\\xc3");                // a sequence cut at the end
  EXPECT_EQ(EscapeControl("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(EscapeControl("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  EXPECT_EQ(EscapeControl("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(EscapeControl("a\xc2\x9b"
                          "2J"),
            "a\\xc2\\x9b2J");                        // C1 CSI: a terminal control
  EXPECT_EQ(EscapeControl("\xc2\xa0"), "\xc2\xa0");  // U+00A0 is printable
}

TEST_F(HostilePaths, ListingsFollowLinksButNameLoops) {
  fs::create_directories(Path("d/sub/deeper"));
  ASSERT_TRUE(WriteFileAtomic(Path("d/a.png"), "x").ok());
  ASSERT_TRUE(WriteFileAtomic(Path("d/sub/deeper/b.png"), "x").ok());
  fs::create_symlink("a.png", Path("d/link.png"));
  fs::create_symlink("nowhere.png", Path("d/dangling.png"));  // skipped, as before
  auto entries = ListDirectory(Path("d"));
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  EXPECT_EQ(entries->size(), 3u);  // a.png, sub, link.png
  auto png = [](const std::string& n) { return n.size() > 4 && n.substr(n.size() - 4) == ".png"; };
  auto files = ListFilesRecursive(Path("d"), png);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 3u);
  // A link to itself (ELOOP) and a link back to an ancestor (a cycle) are named.
  fs::create_symlink("self", Path("d/self"));
  auto looped = ListDirectory(Path("d"));
  ASSERT_FALSE(looped.ok());
  EXPECT_EQ(looped.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(looped.status().message().find("d/self: symbolic link loop"), std::string::npos)
      << looped.status().message();
  fs::remove(Path("d/self"));
  fs::create_directory_symlink("../..", Path("d/sub/deeper/up"));
  auto cycle = ListFilesRecursive(Path("d"), png);
  ASSERT_FALSE(cycle.ok());
  EXPECT_NE(cycle.status().message().find("symbolic link loop (leads back"), std::string::npos)
      << cycle.status().message();
  EXPECT_EQ(ListDirectory(Path("missing")).status().code(), StatusCode::kNotFound);
}

TEST_F(HostilePaths, NestingIsBoundedWithTheLimitNamed) {
  std::string deep = Path("n");
  for (int i = 0; i <= kMaxDirectoryDepth; ++i) deep += "/d";
  fs::create_directories(deep);
  auto r = ListFilesRecursive(Path("n"), [](const std::string&) { return true; });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("deeper than 64 levels (kMaxDirectoryDepth)"),
            std::string::npos)
      << r.status().message();
}

TEST_F(HostilePaths, OutputTargetsAreCheckedBeforeAnyWork) {
  EXPECT_TRUE(CheckOutputFile(Path("new.qkstats"), "--stats").ok());
  ASSERT_TRUE(WriteFileAtomic(Path("old.qkstats"), "x").ok());
  EXPECT_TRUE(CheckOutputFile(Path("old.qkstats"), "--stats").ok());
  fs::create_directories(Path("dir.qkstats"));
  const Status st = CheckOutputFile(Path("dir.qkstats"), "--stats");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--stats " + Path("dir.qkstats") + ": is a directory"),
            std::string::npos)
      << st.message();
  fs::create_symlink("old.qkstats", Path("link.qkstats"));
  EXPECT_NE(CheckOutputFile(Path("link.qkstats"), "--stats").message().find("a symbolic link"),
            std::string::npos);
}

// In a child: registers what a run would (a staging directory with files, a temp file, a created
// directory), installs the handler and raises `sig`; the parent checks the child died of it and
// that everything registered is gone while the rest is kept.
void ExpectCleanedOnSignal(const std::string& dir, int sig) {
  const std::string staging = dir + "/.quantkit-staging-test", created = dir + "/created",
                    temp = dir + "/x.tmp.1";
  const pid_t pid = fork();
  if (pid == 0) {
    fs::create_directories(staging);
    fs::create_directories(created);
    for (const char* f : {"/a", "/b", "/c"}) (void)WriteFileAtomic(staging + f, "staged");
    (void)WriteFileAtomic(temp, "temp");
    (void)WriteFileAtomic(dir + "/keep.txt", "user file");
    CleanupOnSignal s1(staging, CleanupKind::kFlatDirectory);
    CleanupOnSignal s2(created, CleanupKind::kDirectoryIfEmpty);
    CleanupOnSignal s3(temp, CleanupKind::kFile);
    InstallSignalCleanup();
    ::raise(sig);
    _exit(0);  // not reached: the signal ends the process
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), sig) << "the process must end as the signal would have";
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_FALSE(fs::exists(created));
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(fs::exists(dir + "/keep.txt"));
}

TEST_F(HostilePaths, FatalSignalsRemoveWhatTheRunRegistered) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(sig);
    const std::string d = Path("sig" + std::to_string(sig));
    fs::create_directories(d);
    ExpectCleanedOnSignal(d, sig);
  }
}

TEST_F(HostilePaths, ReleasedPathsAreLeftAlone) {
  const pid_t pid = fork();
  if (pid == 0) {
    (void)WriteFileAtomic(Path("committed.txt"), "kept");
    {
      CleanupOnSignal s(Path("committed.txt"), CleanupKind::kFile);
      s.Release();  // what Commit does once the file is in place
    }
    InstallSignalCleanup();
    ::raise(SIGTERM);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(fs::exists(Path("committed.txt")));
}

TEST_F(HostilePaths, OpeningALockedDirectoryRemovesADeadRunsStaging) {
  // What SIGKILL leaves: a staging directory with a file, no process holding the lock.
  fs::create_directories(Path(".quantkit-staging-dead01"));
  ASSERT_TRUE(WriteFileAtomic(Path(".quantkit-staging-dead01/plan.json"), "{}").ok());
  ASSERT_TRUE(WriteFileAtomic(Path("user.txt"), "kept").ok());
  {
    auto set = ArtifactSet::Open(dir_, {"plan.json"});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_FALSE(fs::exists(Path(".quantkit-staging-dead01")));
    // The set's own staging directory is the only one now.
    int staging = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      staging += e.path().filename().string().rfind(".quantkit-staging-", 0) == 0 ? 1 : 0;
    }
    EXPECT_EQ(staging, 1);
  }
  EXPECT_TRUE(fs::exists(Path("user.txt")));
}

}  // namespace
}  // namespace quantkit
