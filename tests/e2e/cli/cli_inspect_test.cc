// `quantkit inspect` end to end: good models print a summary (text or JSON); every kind of bad
// input exits with code 2 and exactly one stderr line naming the file and the reason.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "common/file_util.h"
#include "ir/graph.h"
#include "onnx/export.h"
#include "onnx/import.h"

namespace quantkit {
namespace {

constexpr const char* kNodeTests = "/usr/share/libonnx-testdata/data/node";

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CliInspect : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "qk_cli_XXXXXX";
    ASSERT_NE(mkdtemp(&templ[0]), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string File(const std::string& name) const { return dir_ + "/" + name; }

  CommandResult Run(const std::string& args) const {
    const std::string out = File("stdout.txt");
    const std::string err = File("stderr.txt");
    const std::string cmd =
        std::string(QK_QUANTKIT_BIN) + " " + args + " >'" + out + "' 2>'" + err + "'";
    CommandResult r;
    const int status = std::system(cmd.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFileToString(out).value();
    r.err = ReadFileToString(err).value();
    return r;
  }

  // Runs inspect on `path`, expecting exit 2 and one stderr line starting with the path.
  void ExpectOneLineError(const std::string& path, const std::string& reason) const {
    const CommandResult r = Run("inspect '" + path + "'");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.back(), '\n');
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
    EXPECT_EQ(r.err.rfind("quantkit: " + path + ": ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
  }

  void Write(const std::string& name, const std::string& bytes) const {
    std::ofstream(File(name), std::ios::binary) << bytes;
  }

  std::string dir_;
};

TEST_F(CliInspect, JsonSummaryOfANodeTest) {
  const std::string model = std::string(kNodeTests) + "/test_if/model.onnx";
  ASSERT_EQ(access(model.c_str(), R_OK), 0) << "libonnx-testdata not installed (scripts/setup.sh)";
  const CommandResult r = Run("inspect --json " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ir_version"], 6);
  EXPECT_EQ(j["opsets"]["ai.onnx"], 11);
  EXPECT_EQ(j["ops"]["If"], 1);
  EXPECT_EQ(j["subgraphs"], 2);
  EXPECT_EQ(j["inputs"][0]["dtype"], "bool");
  EXPECT_EQ(j["weights"]["constant_nodes"]["count"], 2);
}

TEST_F(CliInspect, TextSummaryShowsSymbolicDims) {
  const std::string model = File("m.onnx");
  ir::Model m;
  m.ir_version = 8;
  m.SetOpset("", 17);
  ir::Value* x = m.graph->CreateValue("x");
  x->type =
      ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Symbolic("batch"), ir::Dim::Known(3)});
  m.graph->AddInput(x);
  ir::Node* relu = m.graph->AddNode("Relu", {x}, {"y"}).value();
  relu->output(0)->type = x->type;
  m.graph->AddOutput(relu->output(0));
  ASSERT_TRUE(onnx_io::ExportModel(m, model).ok());
  const CommandResult r = Run("inspect " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("float[batch,3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Relu 1"), std::string::npos) << r.out;
}

TEST_F(CliInspect, MissingFile) { ExpectOneLineError(File("nope.onnx"), "No such file"); }

TEST_F(CliInspect, NotAnOnnxFile) {
  Write("text.onnx", "hello, I am a text file\n");
  ExpectOneLineError(File("text.onnx"), "not a valid ONNX protobuf");
}

TEST_F(CliInspect, TruncatedModel) {
  const std::string model = std::string(kNodeTests) + "/test_conv_with_strides_padding/model.onnx";
  ASSERT_EQ(access(model.c_str(), R_OK), 0) << "libonnx-testdata not installed (scripts/setup.sh)";
  const std::string bytes = ReadFileToString(model).value();
  Write("cut.onnx", bytes.substr(0, bytes.size() - 7));
  ExpectOneLineError(File("cut.onnx"), "not a valid ONNX protobuf");
}

// An opset-17 model with one untyped graph input 'x'.
ir::Model ModelWithInputX() {
  ir::Model m;
  m.SetOpset("", 17);
  m.graph->AddInput(m.graph->CreateValue("x"));
  return m;
}

TEST_F(CliInspect, GraphThatViolatesSsa) {
  // The IR cannot hold two producers of one value, so the second producer's output is renamed
  // onto 'y' in the serialized bytes.
  ir::Model m = ModelWithInputX();
  ir::Value* x = m.graph->FindValue("x");
  m.graph->AddOutput(m.graph->AddNode("Relu", {x}, {"y"}, "", "first").value()->output(0));
  ASSERT_TRUE(m.graph->AddNode("Neg", {x}, {"z"}, "", "second").ok());
  ASSERT_TRUE(onnx_io::ExportModel(m, File("ssa.onnx")).ok());
  std::string bytes = ReadFileToString(File("ssa.onnx")).value();
  const size_t z = bytes.find("\x12\x01z");  // NodeProto.output = "z"
  ASSERT_NE(z, std::string::npos);
  bytes[z + 2] = 'y';
  Write("ssa.onnx", bytes);
  ExpectOneLineError(File("ssa.onnx"), "node 'second' (Neg): output 'y' is already defined");
}

TEST_F(CliInspect, ExternalDataFileTooShort) {
  ir::Model m = ModelWithInputX();
  ir::Value* x = m.graph->FindValue("x");
  ir::Value* w = m.graph->AddInitializer("w", ir::Tensor(ir::DType::kFloat, {4096}));
  m.graph->AddOutput(m.graph->AddNode("Add", {x, w}, {"y"}).value()->output(0));
  onnx_io::ExportOptions options;
  options.external_data = true;
  ASSERT_TRUE(onnx_io::ExportModel(m, File("ext.onnx"), options).ok());
  ASSERT_EQ(truncate(File("ext.onnx.data").c_str(), 10), 0);
  ExpectOneLineError(File("ext.onnx"), "initializer 'w': external data [0, 16384) lies outside");
  ASSERT_EQ(unlink(File("ext.onnx.data").c_str()), 0);
  ExpectOneLineError(File("ext.onnx"), "external data file 'ext.onnx.data' cannot be read");
}

// A real exporter's output: resnet18 from torchvision (random weights), exported once into a
// cache under the build tree by qkdev/export_torchvision.py (the zoo's export script).
TEST_F(CliInspect, TorchvisionResnet18) {
  const std::string python = std::string(QK_SOURCE_DIR) + "/.venv/bin/python";
  // make test creates the venv; without it this test must fail, not skip.
  ASSERT_EQ(access(python.c_str(), X_OK), 0) << "no .venv: run scripts/setup.sh";
  const std::string cache = std::string(QK_BINARY_DIR) + "/test_cache";
  const std::string model = cache + "/models/resnet18.opset13.onnx";
  const std::string cmd = "PYTHONPATH='" + std::string(QK_SOURCE_DIR) + "' QUANTKIT_CACHE='" +
                          cache + "' '" + python +
                          "' -m qkdev.export_torchvision --models resnet18 --opset 13 >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const CommandResult r = Run("inspect --json " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["producer"]["name"], "pytorch");
  EXPECT_EQ(j["ops"]["Conv"], 20);
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::parse(R"(["N", 3, 224, 224])"));
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json::parse(R"(["N", 1000])"));
  // About 11.7 M float parameters.
  EXPECT_GT(j["weights"]["initializers"]["bytes"].get<uint64_t>(), 44'000'000u);
}

// --threads is global, accepted after the subcommand, and validated before any work.
TEST_F(CliInspect, ThreadsOptionIsValidated) {
  const std::string model = std::string(kNodeTests) + "/test_relu/model.onnx";
  EXPECT_EQ(Run("inspect '" + model + "' --threads 2").exit_code, 0);
  const CommandResult bad = Run("inspect '" + model + "' --threads -1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--threads: -1 is out of range"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err.find('\n'), bad.err.size() - 1) << "more than one line: " << bad.err;
}

}  // namespace
}  // namespace quantkit
