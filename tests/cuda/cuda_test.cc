// quantkit on a GPU (labels cuda, gpu). Each test skips with "skipped: no CUDA device" where no
// GPU is visible (CI); on the lent GPU machine (docs/gpu.md) they check that
//  - statistics computed on the GPU equal the host collectors byte for byte (same tensors);
//  - QuantizeLinear/DequantizeLinear on the GPU equal the CPU bit for bit (x / scale, round half
//    to even, saturate), ties and saturation included;
//  - FP32 model outputs on the GPU equal the CPU up to summation order;
//  - `quantkit calibrate/eval --device cuda` run end to end and agree with --device cpu;
//  - `quantkit qat --device cuda` trains, and its checkpoint resumes on the CPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "analysis/collect_pass.h"
#include "formats/qkstats.h"
#include "ir/graph.h"
#include "onnx/import.h"
#include "quant/collectors/tensor_collector.h"
#include "runtime/device.h"
#include "runtime/interpreter.h"
#include "runtime/tensor_stats.h"
#include "testing/cli_run.h"
#include "testing/tolerances.h"

namespace quantkit {
namespace {

#define SKIP_WITHOUT_CUDA()                                                         \
  do {                                                                              \
    if (runtime::CudaDeviceCount() == 0) GTEST_SKIP() << "skipped: no CUDA device"; \
  } while (0)

runtime::Device Cuda() {
  runtime::Device d;
  d.kind = runtime::Device::Kind::kCuda;
  return d;
}

std::vector<float> RandomValues(uint32_t seed, size_t n, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(Cuda, StatisticsOnTheGpuEqualTheHostCollectors) {
  SKIP_WITHOUT_CUDA();
  const uint32_t seed = ::testing::UnitTest::GetInstance()->random_seed();
  std::printf("seed %u\n", seed);
  quant::TensorCollector host(quant::kDefaultStreamLog2Bins, /*channel_axis=*/1);
  quant::TensorCollector gpu(quant::kDefaultStreamLog2Bins, /*channel_axis=*/1);
  runtime::TensorStatsRequest request;
  request.channel_axis = 1;
  request.min_range_exp = quant::kMinRangeExp;
  const float scales[] = {1.0f, 1e-3f, 250.0f, 1e-30f};
  for (int b = 0; b < 4; ++b) {
    std::vector<float> v = RandomValues(seed + b, 8 * 16 * 32 * 32, scales[b]);
    v[0] = NAN;
    v[1] = INFINITY;
    v[2] = -0.0f;
    v[3] = 0.0f;
    v[4] = 1e-42f;
    v[5] = 2.0f;
    const std::vector<int64_t> shape = {8, 16, 32, 32};
    ASSERT_TRUE(host.Observe({quant::FloatSpan(v), shape}).ok());
    auto stats = runtime::ComputeTensorStats({ir::DType::kFloat, shape, v.data()}, request, Cuda());
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    auto batch = analysis::CollectorFromStats(*stats, quant::kDefaultStreamLog2Bins);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ASSERT_TRUE(gpu.Merge(*batch).ok());
  }
  EXPECT_TRUE(host == gpu);
  formats::StatsFile a, b;
  a.model_sha256 = b.model_sha256 = std::string(64, '0');
  a.tensors.emplace("t", host);
  b.tensors.emplace("t", gpu);
  EXPECT_EQ(formats::SerializeStats(a), formats::SerializeStats(b));
}

// y = QuantizeLinear(x, s, zp) and z = DequantizeLinear(y, s, zp), per tensor and per channel.
ir::Model QdqModel(bool per_channel) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(ir::DType::kFloat,
                                 {ir::Dim::Known(4), ir::Dim::Known(3), ir::Dim::Known(64)});
  g.AddInput(x);
  ir::Value* s =
      per_channel
          ? g.AddInitializer("s", ir::Tensor::FromVector(ir::DType::kFloat, {3},
                                                         std::vector<float>{0.1f, 0.0371f, 3.0f}))
          : g.AddInitializer(
                "s", ir::Tensor::FromVector(ir::DType::kFloat, {}, std::vector<float>{0.05f}));
  ir::Value* zp =
      per_channel ? g.AddInitializer("zp", ir::Tensor::FromVector(ir::DType::kInt8, {3},
                                                                  std::vector<int8_t>{0, -3, 5}))
                  : g.AddInitializer(
                        "zp", ir::Tensor::FromVector(ir::DType::kInt8, {}, std::vector<int8_t>{0}));
  ir::Node* q = *g.AddNode("QuantizeLinear", {x, s, zp}, {"y"}, "", "q");
  ir::Node* dq = *g.AddNode("DequantizeLinear", {q->output(0), s, zp}, {"z"}, "", "dq");
  if (per_channel) {
    q->SetAttr(ir::Attribute::Int("axis", 1));
    dq->SetAttr(ir::Attribute::Int("axis", 1));
  }
  g.AddOutput(q->output(0));
  g.AddOutput(dq->output(0));
  return m;
}

TEST(Cuda, QuantizeLinearIsBitExactOnTheGpu) {
  SKIP_WITHOUT_CUDA();
  for (bool per_channel : {false, true}) {
    // Random values, exact ties (k + 0.5) * scale, and values far beyond the int8 range.
    std::vector<float> v = RandomValues(11, 4 * 3 * 64, 4.0f);
    for (int i = 0; i < 64; ++i)
      v[static_cast<size_t>(i)] = (static_cast<float>(i) - 32.0f + 0.5f) * 0.05f;
    v[100] = 1e6f;
    v[101] = -1e6f;
    ir::Tensor x = ir::Tensor::FromVector(ir::DType::kFloat, {4, 3, 64}, v);
    std::map<std::string, std::vector<runtime::NamedTensor>> outs;
    for (const runtime::Device& d : {runtime::Device{}, Cuda()}) {
      runtime::InterpreterOptions opts;
      opts.device = d;
      auto interp = runtime::Interpreter::Create(QdqModel(per_channel), opts);
      ASSERT_TRUE(interp.ok()) << interp.status().ToString();
      auto o = (*interp)->Run({{"x", x}});
      ASSERT_TRUE(o.ok()) << o.status().ToString();
      outs[d.ToString()] = std::move(*o);
    }
    const auto& cpu = outs["cpu"];
    const auto& gpu = outs["cuda:0"];
    ASSERT_EQ(cpu.size(), gpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      ASSERT_EQ(cpu[i].tensor.nbytes(), gpu[i].tensor.nbytes());
      EXPECT_EQ(std::memcmp(cpu[i].tensor.data(), gpu[i].tensor.data(), cpu[i].tensor.nbytes()), 0)
          << cpu[i].name << " differs (per_channel " << per_channel << ")";
    }
  }
}

TEST(Cuda, ZooModelsMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (const char* name : {"plain_cnn", "resnet_small", "mobilenetv2_small", "vit_tiny"}) {
    const std::string path = std::string(QK_SOURCE_DIR) + "/models/zoo/" + name + ".onnx";
    std::vector<float> v = RandomValues(5, 16 * 28 * 28, 1.0f);
    ir::Tensor x = ir::Tensor::FromVector(ir::DType::kFloat, {16, 1, 28, 28}, v);
    std::vector<std::vector<runtime::NamedTensor>> outs;
    for (const runtime::Device& d : {runtime::Device{}, Cuda()}) {
      auto model = onnx_io::ImportModel(path);
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      runtime::InterpreterOptions opts;
      opts.device = d;
      auto interp = runtime::Interpreter::Create(std::move(*model), opts);
      ASSERT_TRUE(interp.ok()) << interp.status().ToString();
      auto o = (*interp)->Run({{(*interp)->input_names()[0], x}});
      ASSERT_TRUE(o.ok()) << name << ": " << o.status().ToString();
      outs.push_back(std::move(*o));
    }
    const float* a = outs[0][0].tensor.data_as<float>();
    const float* b = outs[1][0].tensor.data_as<float>();
    for (int64_t i = 0; i < outs[0][0].tensor.numel(); ++i) {
      ASSERT_NEAR(a[i], b[i], testing::kGpuFp32Atol + testing::kGpuFp32Rtol * std::fabs(a[i]))
          << name << " output element " << i;
    }
  }
}

std::map<std::string, double> ReadRanges(const std::string& path) {
  std::map<std::string, double> r;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.rfind(':');
    if (colon == std::string::npos) continue;
    r[line.substr(0, colon)] = std::stod(line.substr(colon + 1));
  }
  return r;
}

TEST(Cuda, CliCalibrateAndEvalOnTheGpuAgreeWithTheCpu) {
  SKIP_WITHOUT_CUDA();
  std::string dir = ::testing::TempDir() + "qk_cuda_XXXXXX";
  ASSERT_NE(mkdtemp(&dir[0]), nullptr);
  const std::string model = std::string(QK_SOURCE_DIR) + "/models/zoo/resnet_small.onnx";
  std::map<std::string, std::map<std::string, double>> ranges;
  for (const std::string& device : {std::string("cpu"), std::string("cuda")}) {
    const auto r = testing::RunQuantkit(QK_QUANTKIT_BIN,
                                        "calibrate " + model +
                                            " --data fashion-mnist:calib --samples 512 "
                                            "--method max -q -o " +
                                            dir + "/" + device + " --device " + device,
                                        dir);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ranges[device] = ReadRanges(dir + "/" + device + "/ranges.txt");
    const auto e = testing::RunQuantkit(QK_QUANTKIT_BIN,
                                        "eval " + dir + "/" + device +
                                            "/model.qdq.onnx --data fashion-mnist:test "
                                            "--samples 1000 -q --device " +
                                            device,
                                        dir);
    EXPECT_EQ(e.exit_code, 0) << e.err;
  }
  ASSERT_FALSE(ranges["cpu"].empty());
  ASSERT_EQ(ranges["cpu"].size(), ranges["cuda"].size());
  for (const auto& [tensor, amax] : ranges["cpu"]) {
    EXPECT_NEAR(ranges["cuda"][tensor], amax, testing::kGpuAmaxRtol * std::fabs(amax)) << tensor;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

// QAT trains on the GPU, and its checkpoints move between devices: half the steps on the GPU,
// the rest resumed on the CPU (parameters are stored as host copies, the optimizer state is
// mapped onto the reader's device by QatTrainer::LoadCheckpoint).
TEST(Cuda, QatTrainsOnTheGpuAndResumesOnTheCpu) {
  SKIP_WITHOUT_CUDA();
  std::string dir = ::testing::TempDir() + "qk_cuda_XXXXXX";
  ASSERT_NE(mkdtemp(&dir[0]), nullptr);
  const std::string common = "qat " + std::string(QK_SOURCE_DIR) +
                             "/models/zoo/plain_cnn.onnx --data fashion-mnist:train --samples 512 "
                             "--batch-size 32 --steps 8 --seed 1 -q -o " +
                             dir + "/b";
  const auto first =
      testing::RunQuantkit(QK_QUANTKIT_BIN, common + " --stop-after 4 --device cuda", dir);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(access((dir + "/b/checkpoint.npz").c_str(), F_OK), 0);
  const auto rest = testing::RunQuantkit(
      QK_QUANTKIT_BIN, common + " --resume " + dir + "/b/checkpoint.npz --device cpu", dir);
  EXPECT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_EQ(access((dir + "/b/model.qdq.onnx").c_str(), F_OK), 0);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

TEST(Cuda, MissingDeviceOrdinalExits3) {
  SKIP_WITHOUT_CUDA();
  std::string dir = ::testing::TempDir() + "qk_cuda_XXXXXX";
  ASSERT_NE(mkdtemp(&dir[0]), nullptr);
  const auto r = testing::RunQuantkit(
      QK_QUANTKIT_BIN,
      "eval " + std::string(QK_SOURCE_DIR) +
          "/models/zoo/plain_cnn.onnx --data fashion-mnist:test --device cuda:99",
      dir);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("cuda:99"), std::string::npos) << r.err;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace quantkit
