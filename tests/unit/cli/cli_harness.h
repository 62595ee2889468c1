// Runs the quantkit binary as a user would, and checks what issue #13 requires of every run on bad
// input: an exit code from the documented set (docs/cli.md "Exit codes"), one stderr line naming
// the file / node / tensor, bounded memory (peak RSS of the child, from wait4), no hang (a
// wall-clock limit, then SIGKILL), and an output directory left exactly as it was.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace quantkit::testing {

// Peak RSS allowed for any run on an input under 1 MB (issue #13: "no gigabytes from a tiny
// file"). ASan's shadow memory and libtorch's own start-up stay far below it.
inline constexpr long kMaxRssKb = 1024L * 1024L;
// A run on a small bad input answers in seconds; a hang (FIFO, endless device) never does.
// Generous for a sanitizer build on a loaded 2-core machine.
inline constexpr int kRunTimeoutSeconds = 120;

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal or by the timeout
  int signal = 0;
  bool timed_out = false;
  long max_rss_kb = 0;
  std::string out, err;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// What a child may do differently from a plain run.
struct SpawnOptions {
  // RLIMIT_FSIZE in bytes (0: unlimited): writes beyond it fail with EFBIG as on a full disk
  // (SIGXFSZ is ignored in the child so the write fails instead of killing it).
  long file_size_limit = 0;
};

// Starts QK_QUANTKIT_BIN with `args` (no shell: names may hold any byte), stdout/stderr to files
// in `scratch`; returns the child's pid.
inline pid_t SpawnQuantkit(const std::vector<std::string>& args, const std::string& scratch,
                           const SpawnOptions& options = {}) {
  const std::string out_path = scratch + "/.stdout", err_path = scratch + "/.stderr";
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    if (options.file_size_limit > 0) {
      ::signal(SIGXFSZ, SIG_IGN);
      const rlimit limit{static_cast<rlim_t>(options.file_size_limit),
                         static_cast<rlim_t>(options.file_size_limit)};
      ::setrlimit(RLIMIT_FSIZE, &limit);
    }
    std::vector<char*> argv;
    static std::string bin = QK_QUANTKIT_BIN;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for a child of SpawnQuantkit (SIGKILL after `timeout_s`) and collects what it did.
inline RunResult WaitQuantkit(pid_t pid, const std::string& scratch,
                              int timeout_s = kRunTimeoutSeconds) {
  RunResult r;
  int status = 0;
  struct rusage usage {};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (true) {
    const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status) && !r.timed_out) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.max_rss_kb = usage.ru_maxrss;
  r.out = ReadAll(scratch + "/.stdout");
  r.err = ReadAll(scratch + "/.stderr");
  return r;
}

// Runs QK_QUANTKIT_BIN with `args` to the end.
inline RunResult RunQuantkit(const std::vector<std::string>& args, const std::string& scratch,
                             int timeout_s = kRunTimeoutSeconds, const SpawnOptions& options = {}) {
  return WaitQuantkit(SpawnQuantkit(args, scratch, options), scratch, timeout_s);
}

// Peak RSS of `quantkit --version` in this build, measured once: the floor every run starts from
// (libtorch's libraries, ~165 MB; with ASan's shadow memory ~620 MB). Bounds tighter than
// kMaxRssKb are stated above it, so they hold in the sanitizer build too.
inline long StartupRssKb(const std::string& scratch) {
  static const long kb = RunQuantkit({"--version"}, scratch).max_rss_kb;
  return kb;
}

// Every file under `dir` with its bytes (the "no output left or changed" check).
inline std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name == ".stdout" || name == ".stderr") continue;
    files[it->path().string()] =
        it->is_regular_file() ? ReadAll(it->path().string()) : std::string("<non-file>");
  }
  return files;
}

// The properties every failing run must have. `names` must all appear in the one stderr line.
inline void ExpectCleanFailure(const RunResult& r, const std::set<int>& codes,
                               const std::vector<std::string>& names, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_FALSE(r.timed_out) << "hung (killed after the time limit)";
  EXPECT_EQ(r.signal, 0) << "killed by signal " << r.signal << "\n" << r.err;
  EXPECT_TRUE(codes.count(r.exit_code)) << "exit " << r.exit_code << "\n" << r.err;
  EXPECT_NE(r.exit_code, 70) << "internal error for bad input: " << r.err;
  EXPECT_LT(r.max_rss_kb, kMaxRssKb) << "peak RSS " << r.max_rss_kb / 1024 << " MB";
  ASSERT_FALSE(r.err.empty()) << "no message";
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not exactly one line: " << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << "raw escape character reached the terminal";
  EXPECT_EQ(r.err.rfind("quantkit: ", 0), 0u) << r.err;
  for (const std::string& n : names)
    EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not named: " << r.err;
}

inline std::string ParseModelBytes(const char* text) {
  ::onnx::ModelProto model;
  const auto status = ::onnx::OnnxParser::Parse(model, text);
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  return model.SerializeAsString();
}

// A .npy (version 1.0) of float32 or float64 values with the given shape.
inline std::string NpyBytes(const std::vector<int64_t>& shape, const std::vector<double>& values,
                            bool f64 = false) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  std::string header = std::string("{'descr': '") + (f64 ? "<f8" : "<f4") +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  for (double v : values) {
    if (f64) {
      out.append(reinterpret_cast<const char*>(&v), sizeof(v));
    } else {
      const float f = static_cast<float>(v);
      out.append(reinterpret_cast<const char*>(&f), sizeof(f));
    }
  }
  return out;
}

}  // namespace quantkit::testing
