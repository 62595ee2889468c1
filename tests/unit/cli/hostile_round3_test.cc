// Hostile input, round 3 (issue #48): the surfaces added in round 3 (the PTQ stages and their
// grammar, the float-part options, the check, qat's options) tried as a new user would. Each test
// names the defect of the issue it pins. Failing runs go through ExpectFails (hostile_fixture.h):
// a documented exit code, one stderr line naming the option / file / input, and the output
// directory left as it was. Labelled `unit` with the earlier rounds, so `make asan` runs it.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/hostile_fixture.h"

namespace quantkit::testing {
namespace {

namespace fs = std::filesystem;

// Two inputs as a recurrent model has them: the audio frame `input` and a `state` added only at the
// end, so a sub-model of the first layers reads `input` alone.
constexpr const char* kStateModel = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  net (float[N,4] input, float[N,4] state) => (float[N,4] y)
  <float[4,4] W1 = {0.5,-0.25,0.125,1, -1,0.75,0.5,-0.5, 0.25,0.25,-0.75,0.5, 1,-0.5,0.25,0.125},
   float[4,4] W2 = {0.3,0.1,-0.2,0.4, -0.6,0.2,0.9,-0.1, 0.05,-0.7,0.3,0.2, 0.8,0.4,-0.3,-0.5},
   float[4] B2 = {0.1,-0.2,0.05,0.3}>
  {
    a = MatMul(input, W1)
    r = Relu(a)
    m = MatMul(r, W2)
    mb = Add(m, B2)
    y = Add(mb, state)
  })";

// The Conv model of the fixture with a bias, the layer bias correction edits.
constexpr const char* kConvBiasModel = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  net (float[N,1,4,4] x) => (float[N,2,4,4] y)
  <float[2,1,3,3] W = {1,0,-1,2,0,-2,1,0,-1, 0,1,0,1,-4,1,0,1,0}, float[2] B = {0.1, -0.1}>
  {
    c = Conv <pads = [1,1,1,1], kernel_shape = [3,3]> (x, W, B)
    y = Relu(c)
  })";

class HostileRound3 : public Hostile {
 protected:
  // DIR/input.npy and DIR/state.npy: 32 samples of the state model.
  std::string StateData() const {
    const std::string dir = File("state_data");
    fs::create_directories(dir);
    std::vector<double> input, state;
    for (int i = 0; i < 32 * 4; ++i) {
      input.push_back(std::sin(0.37 * i) * (i % 4 == 3 ? 6.0 : 1.0));  // one outlier channel
      state.push_back(0.1 * ((i * 7) % 11) - 0.5);
    }
    WriteAll(dir + "/input.npy", NpyBytes({32, 4}, input));
    WriteAll(dir + "/state.npy", NpyBytes({32, 4}, state));
    return dir;
  }
};

// Every float initializer of the ONNX file at `path` (the biases and weights written).
std::vector<float> FloatInitializers(const std::string& path) {
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(ReadAll(path))) << path;
  std::vector<float> values;
  for (const ::onnx::TensorProto& t : m.graph().initializer()) {
    if (t.data_type() != ::onnx::TensorProto::FLOAT) continue;
    if (!t.raw_data().empty()) {
      const std::string& raw = t.raw_data();
      for (size_t i = 0; i + sizeof(float) <= raw.size(); i += sizeof(float)) {
        float f = 0;
        std::memcpy(&f, raw.data() + i, sizeof(f));
        values.push_back(f);
      }
    }
    for (float f : t.float_data()) values.push_back(f);
  }
  return values;
}

// Defect 1 (and first battery 1): the PTQ stages built a sub-model with one input and fed it the
// whole two-input sample ("unknown input 'state'"). Every stage, alone and together, and under
// --method auto, must calibrate the state model.
TEST_F(HostileRound3, PtqStagesOnATwoInputModel) {
  WriteAll(File("state.onnx"), ParseModelBytes(kStateModel));
  const std::string data = StateData();
  const std::vector<std::vector<std::string>> variants = {
      {"--ptq", "smoothquant"},
      {"--ptq", "bias-correction"},
      {"--ptq", "seqmse"},
      {"--ptq", "adaround:iterations=5"},
      {"--ptq", "smoothquant,seqmse,adaround:iterations=5,bias-correction"},
      {"--ptq", "smoothquant", "--method", "auto"},
  };
  int k = 0;
  for (const auto& extra : variants) {
    const std::string out = File("out" + std::to_string(k++));
    std::vector<std::string> args = {"calibrate", File("state.onnx"), "--data", data, "-o", out,
                                     "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = Run(args);
    std::string what;
    for (const std::string& a : extra) what += a + " ";
    EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.err;
    EXPECT_TRUE(fs::exists(out + "/model.qdq.onnx")) << what;
  }
}

// Deliver 1: QAT's teacher and trainer, analyze and fallback's sub-models on the state model.
TEST_F(HostileRound3, QatAnalyzeFallbackOnATwoInputModel) {
  WriteAll(File("state.onnx"), ParseModelBytes(kStateModel));
  const std::string data = StateData();
  const std::string calib = File("calib");
  ASSERT_EQ(Run({"calibrate", File("state.onnx"), "--data", data, "-o", calib, "-q"}).exit_code, 0);
  const std::string plan = calib + "/plan.json";
  RunResult r = Run({"qat", File("state.onnx"), "--plan", plan, "--data", data, "--steps", "3",
                     "--batch-size", "8", "--lr", "1e-4", "-o", File("qat"), "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(File("qat/model.qdq.onnx"))) << r.err;
  r = Run({"analyze", File("state.onnx"), "--plan", plan, "--data", data, "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Run({"fallback", File("state.onnx"), "--plan", plan, "--data", data, "--budget", "100",
           "--metric", "rel_mse", "-o", File("fallback"), "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Defect "a silent broken model": NaN pixels in the data made bias correction write NaN biases
// while the check said "agreement 100%". The biases stay finite and the check names the data.
TEST_F(HostileRound3, BiasCorrectionOnNonFiniteDataKeepsFiniteBiases) {
  WriteAll(File("bias.onnx"), ParseModelBytes(kConvBiasModel));
  std::vector<double> values;
  for (int i = 0; i < 16 * 16; ++i) values.push_back(i % 37 == 5 ? NAN : (i % 7) * 0.25 - 0.5);
  WriteAll(File("nan.npy"), NpyBytes({16, 1, 4, 4}, values));
  const RunResult r = Run({"calibrate", File("bias.onnx"), "--data", File("nan.npy"), "--ptq",
                           "bias-correction", "-o", File("out"), "--float-dtype", "fp32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<float> initializers = FloatInitializers(File("out/model.qdq.onnx"));
  ASSERT_FALSE(initializers.empty());
  for (float v : initializers) EXPECT_TRUE(std::isfinite(v)) << "a written initializer is " << v;
  EXPECT_NE((r.out + r.err).find("not finite"), std::string::npos)
      << "the check must say the output is not finite:\n"
      << r.out << r.err;
  EXPECT_EQ((r.out + r.err).find("agreement 100.0%"), std::string::npos) << r.out;
}

// Defects "a crash" (--lr 1e-320: std::stod out_of_range) and "--scale 1e-400 becomes 0": a value
// a double cannot hold as a normal number is refused like any out-of-range value.
TEST_F(HostileRound3, NumbersBelowTheSmallestDoubleAreRefused) {
  for (const char* lr : {"1e-320", "2e-308", "1e-400"}) {
    ExpectFails({"qat", File("model.onnx"), "--data", File("x.npy"), "--lr", lr, "-o", File("q")},
                {2}, {"--lr"}, dir_);
  }
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), "--scale", "1e-400", "-o",
               File("o")},
              {2}, {"--scale"}, dir_);
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), "--samples", "1e400", "-o",
               File("o")},
              {2}, {"--samples"}, dir_);
}

// Defect: a data config's "scale" of 1e308 was not range-checked (the CLI's --scale is).
TEST_F(HostileRound3, ConfigScaleIsRangeChecked) {
  fs::create_directories(File("imgs"));
  for (const char* scale : {"1e308", "1e-320", "0", "-1"}) {
    WriteAll(File("c.json"), std::string(R"({"images": "imgs", "scale": )") + scale + "}");
    ExpectFails({"calibrate", File("model.onnx"), "--data", File("c.json"), "-o", File("o")}, {2},
                {"scale"}, dir_);
  }
}

// Defect: exit 70 from `inspect` of a valid model whose dim_param is a 30-digit string.
TEST_F(HostileRound3, InspectOfADigitDimParam) {
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(ParseModelBytes(kConvModel)));
  const std::string digits = "123456789012345678901234567890";
  m.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param(digits);
  WriteAll(File("digits.onnx"), m.SerializeAsString());
  for (const bool json : {false, true}) {
    std::vector<std::string> args = {"inspect", File("digits.onnx")};
    if (json) args.push_back("--json");
    const RunResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(digits), std::string::npos) << r.out;
    // A symbolic dim stays a name in JSON, however it is spelled.
    if (json) {
      EXPECT_NE(r.out.find("\"" + digits + "\""), std::string::npos) << r.out;
    }
  }
}

// Defect: `convert CACHE out.qdq.onnx --model M --data D` exited 2 (the check could not run) but
// left out.qdq.onnx behind.
TEST_F(HostileRound3, ConvertWhoseCheckFailsWritesNothing) {
  ASSERT_EQ(
      Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", File("calib"), "-q"})
          .exit_code,
      0);
  std::vector<double> values(8 * 25, 0.5);
  WriteAll(File("wrong.npy"), NpyBytes({8, 1, 5, 5}, values));
  fs::create_directories(File("conv"));
  ExpectFails({"convert", File("calib/calib.cache"), File("conv/out.qdq.onnx"), "--model",
               File("model.onnx"), "--data", File("wrong.npy")},
              {2}, {"wrong.npy"}, File("conv"));
  EXPECT_FALSE(fs::exists(File("conv/out.qdq.onnx")));
}

// First battery 8: a flag given a value (--cast-io=2, --cast-io=yes) was silently true.
TEST_F(HostileRound3, FlagsTakeNoValue) {
  for (const char* flag : {"--cast-io=2", "--cast-io=yes", "--no-check=0"}) {
    ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), flag, "-o", File("o")},
                {2}, {std::string(flag).substr(0, std::string(flag).find('='))}, dir_);
  }
}

// First battery 6 and 7: --int8 off with a stage ran it on 0 layers; --ptq '' was accepted while
// 'seqmse,' was refused; a repeated parameter kept the last value silently.
TEST_F(HostileRound3, PtqOptionMistakes) {
  const std::vector<std::string> base = {"calibrate", File("model.onnx"), "--data", File("x.npy"),
                                         "-o",        File("o")};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  ExpectFails(with({"--int8", "off", "--float-dtype", "fp16", "--ptq", "smoothquant"}), {2},
              {"--int8 off"}, dir_);
  ExpectFails(with({"--ptq", ""}), {2}, {"--ptq"}, dir_);
  ExpectFails(with({"--ptq", "adaround:iterations=2:iterations=3"}), {2}, {"iterations", "twice"},
              dir_);
  ExpectFails(with({"--ptq", "adaround:iterations=2.5"}), {2}, {"not an integer"}, dir_);
}

// A .npy of float16 values, each exactly representable (multiples of 1/4 below 2: the exponent
// rebiased, the top mantissa bits kept).
std::string NpyF16Bytes(const std::vector<int64_t>& shape, const std::vector<double>& values) {
  std::string f32 = NpyBytes(shape, values);
  const size_t header = f32.size() - values.size() * 4;
  std::string out = f32.substr(0, header);
  const size_t descr = out.find("<f4");
  out.replace(descr, 3, "<f2");
  for (double v : values) {
    uint16_t h = 0;
    if (v != 0) {
      const float f = static_cast<float>(v);
      uint32_t bits = 0;
      std::memcpy(&bits, &f, sizeof(bits));
      const uint32_t sign = bits >> 31, exponent = (bits >> 23) & 0xff, mantissa = bits & 0x7fffff;
      h = static_cast<uint16_t>((sign << 15) | ((exponent - 127 + 15) << 10) | (mantissa >> 13));
    }
    out.append(reinterpret_cast<const char*>(&h), sizeof(h));
  }
  return out;
}

// First battery 2: quantkit could not evaluate its own --cast-io output (its check was skipped
// with a warning about the input dtype; eval refused float images for a float16 input and called
// every float16 output "not a float tensor").
TEST_F(HostileRound3, CastIoOutputIsEvaluable) {
  const RunResult cal =
      Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "--cast-io", "-o", File("c")});
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  EXPECT_EQ(cal.out.find("no accuracy check"), std::string::npos) << cal.out;
  EXPECT_NE(cal.out.find("check: "), std::string::npos) << cal.out;
  // float32 data for the float16 input (rounded), against the FP32 model.
  RunResult r = Run({"eval", File("c/model.qdq.onnx"), "--data", File("x.npy"), "--reference",
                     File("model.onnx")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("argmax agreement"), std::string::npos) << r.out;
  // float16 data: the model's own type, widened for the FP32 reference.
  std::vector<double> values;
  for (int i = 0; i < 8 * 16; ++i) values.push_back((i % 7) * 0.25 - 0.5);
  WriteAll(File("x16.npy"), NpyF16Bytes({8, 1, 4, 4}, values));
  r = Run({"eval", File("c/model.qdq.onnx"), "--data", File("x16.npy"), "--reference",
           File("model.onnx")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("argmax agreement"), std::string::npos) << r.out;
}

// First battery 4: --metric frame_agreement / decode_agreement on a [N, classes] output reported
// 1.0000 (analyze, eval, fallback, calibrate --budget). They read sequences; a class vector is
// refused.
TEST_F(HostileRound3, SequenceMetricsRefuseAClassVector) {
  WriteAll(File("state.onnx"), ParseModelBytes(kStateModel));
  const std::string data = StateData();
  ASSERT_EQ(Run({"calibrate", File("state.onnx"), "--data", data, "-o", File("p"), "-q"}).exit_code,
            0);
  const std::string plan = File("p/plan.json");
  for (const char* metric : {"frame_agreement", "decode_agreement"}) {
    SCOPED_TRACE(metric);
    ExpectFails({"eval", File("state.onnx"), "--plan", plan, "--data", data, "--metric", metric},
                {2}, {metric, "use agreement"}, dir_);
    ExpectFails({"analyze", File("state.onnx"), "--plan", plan, "--data", data, "--metric", metric},
                {2}, {metric, "use agreement"}, dir_);
    ExpectFails({"fallback", File("state.onnx"), "--plan", plan, "--data", data, "--metric", metric,
                 "--budget", "1", "-o", File("fb")},
                {2}, {metric, "use agreement"}, dir_);
    ExpectFails({"calibrate", File("state.onnx"), "--data", data, "--budget", "1", "--metric",
                 metric, "-o", File("cb")},
                {2}, {metric, "use agreement"}, dir_);
  }
}

// First battery 11: `analyze --layers float` on a plan with an FP32 float part exited 2 naming no
// plan file.
TEST_F(HostileRound3, AnalyzeFloatLayersOfAnFp32PlanNamesThePlan) {
  ASSERT_EQ(Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "--float-dtype", "fp32",
                 "-o", File("p"), "-q"})
                .exit_code,
            0);
  ExpectFails({"analyze", File("model.onnx"), "--plan", File("p/plan.json"), "--data",
               File("x.npy"), "--layers", "float"},
              {2}, {File("p/plan.json"), "FP32", "--layers int8"}, dir_);
}

}  // namespace
}  // namespace quantkit::testing
