// Helpers for src/onnx tests: models written in ONNX text syntax, temp directories, files.
#pragma once

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace quantkit::onnx_io::testutil {

// Parses ONNX text syntax (onnx/defs/parser.h) into a ModelProto; fails the test on a typo.
inline ::onnx::ModelProto ParseModel(const char* text) {
  ::onnx::ModelProto model;
  const auto status = ::onnx::OnnxParser::Parse(model, text);
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  return model;
}

// x[N,4] -> Relu -> a -> Add(a, w) -> y, with w a 4-float initializer.
inline ::onnx::ModelProto SmallModel() {
  auto model = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 17], producer_name: "quantkit-test">
    small (float[N, 4] x) => (float[N, 4] y) {
      a = Relu(x)
      y = Add(a, w)
    })");
  auto* w = model.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(4);
  for (float v : {1.0f, 2.0f, 3.0f, 4.0f}) w->add_float_data(v);
  return model;
}

// A fresh directory under $TMPDIR, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base ? base : "/tmp") + "/quantkit_onnx_XXXXXX";
    path_ = mkdtemp(&templ[0]) ? templ : std::string();
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline bool FileExists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace quantkit::onnx_io::testutil
