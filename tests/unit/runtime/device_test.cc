// --device parsing, the availability check (a clear kUnsupported when CUDA is asked for where
// there is none, never a silent CPU run) and the per-device batch-size default.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/device.h"
#include "runtime/interpreter.h"
#include "runtime/tensor_stats.h"

namespace quantkit::runtime {
namespace {

TEST(Device, ParsesCpuCudaAndOrdinals) {
  auto cpu = ParseDevice("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE(cpu->is_cuda());
  EXPECT_EQ(cpu->ToString(), "cpu");
  auto cuda = ParseDevice("cuda");
  ASSERT_TRUE(cuda.ok());
  EXPECT_TRUE(cuda->is_cuda());
  EXPECT_EQ(cuda->index, 0);
  auto two = ParseDevice("cuda:2");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->index, 2);
  EXPECT_EQ(two->ToString(), "cuda:2");
}

TEST(Device, RejectsMalformedNames) {
  // Each would otherwise be read as some device the user did not mean.
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:+1", "cuda:1x", "cuda:0:1",
                          "cpu:0", "cuda:99999"}) {
    auto d = ParseDevice(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(d.status().message().find("expected cpu, cuda or cuda:N"), std::string::npos);
  }
}

TEST(Device, CpuIsAlwaysAvailable) {
  EXPECT_TRUE(CheckDeviceAvailable(Device{}).ok());
  EXPECT_TRUE(SetDefaultDevice(Device{}).ok());
  EXPECT_FALSE(DefaultDevice().is_cuda());
  EXPECT_EQ(DefaultBatchSize(32), 32);
}

TEST(Device, CudaWithoutAGpuIsUnsupportedAndKeepsTheCpu) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is visible (tests/cuda covers it)";
  Device cuda;
  cuda.kind = Device::Kind::kCuda;
  const Status st = SetDefaultDevice(cuda);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);  // exit code 3
  EXPECT_NE(st.message().find("--device cuda:0"), std::string::npos) << st.message();
  // Which of the two reasons: the build (Debian's libtorch) or the machine (PyPI torch, no GPU).
  const char* reason = LibtorchHasCuda() ? "no CUDA device is visible" : "libtorch without CUDA";
  EXPECT_NE(st.message().find(reason), std::string::npos) << st.message();
  EXPECT_FALSE(DefaultDevice().is_cuda());
  // An interpreter asked for CUDA explicitly fails the same way, before any compute.
  ir::Model m;
  m.SetOpset("", 17);
  InterpreterOptions opts;
  opts.device = cuda;
  auto interp = Interpreter::Create(std::move(m), opts);
  ASSERT_FALSE(interp.ok());
  EXPECT_EQ(interp.status().code(), StatusCode::kUnsupported);
}

// Asks for device statistics; counts which callback it gets.
class StatsObserver : public Observer {
 public:
  const TensorStatsRequest* StatsRequestFor(const std::string&) const override { return &request_; }
  Status OnTensor(const std::string&, const ir::Node*, const TensorView& view) override {
    ++views;
    return Status::Ok();
  }
  Status OnStats(const std::string&, const ir::Node*, const TensorStats& stats) override {
    ++summaries;
    return Status::Ok();
  }
  int views = 0, summaries = 0;

 private:
  TensorStatsRequest request_;
};

TEST(Device, HostTensorsGoToOnTensorEvenWhenStatisticsAreOffered) {
  // On the CPU the host collectors stay in charge (their speed and results are unchanged);
  // only tensors on a GPU are summarised where they live.
  if (std::getenv("QUANTKIT_DEVICE_STATS") != nullptr)
    GTEST_SKIP() << "QUANTKIT_DEVICE_STATS is set";
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Known(2)});
  g.AddInput(x);
  auto relu = g.AddNode("Relu", {x}, {"y"}, "", "relu");
  ASSERT_TRUE(relu.ok());
  g.AddOutput((*relu)->output(0));
  auto interp = Interpreter::Create(std::move(m));
  ASSERT_TRUE(interp.ok()) << interp.status().ToString();
  StatsObserver obs;
  RunOptions opts;
  opts.observers = {&obs};
  auto out = (*interp)->Run(
      {{"x", ir::Tensor::FromVector(ir::DType::kFloat, {2}, std::vector<float>{-1, 2})}}, opts);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(obs.views, 2);  // x and y
  EXPECT_EQ(obs.summaries, 0);
}

}  // namespace
}  // namespace quantkit::runtime
