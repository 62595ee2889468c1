// A scratch directory and models written from ONNX text syntax (libonnx's parser), shared by the
// tests that build small models by hand (test-only; uses protobuf and gtest).
#pragma once

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace quantkit::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents at the end of the scope.
class TempDir {
 public:
  TempDir() {
    std::string templ =
        std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/qk_test_XXXXXX";
    path_ = mkdtemp(&templ[0]) ? templ : std::string();
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Parses `text` (ONNX text syntax) and writes it to dir/name; returns the path. A parse error
// fails the calling test.
inline std::string WriteModel(const TempDir& dir, const std::string& name, const char* text) {
  ::onnx::ModelProto model;
  const auto status = ::onnx::OnnxParser::Parse(model, text);
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  const std::string path = dir.File(name);
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
  return path;
}

}  // namespace quantkit::testing
