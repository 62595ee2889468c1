// FP32 is IEEE float32 after every interpreter and trainer is created (runtime::UseDevice), on
// every device and torch: the settings are ATen's process-wide context, so a CPU build reads
// them back the same as a GPU build (tests/cuda checks the GPU's arithmetic itself). Before
// issue 26, torch >= 2.10 kept cuDNN convolutions on TF32 (cuda/conv is a tf32 leaf entry that
// the cuda/all setting did not reach), which this test reads back on the cuda preset's torch.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/version.h>

#include "runtime/aten_bridge.h"
#include "runtime/device.h"
#include "runtime/interpreter.h"
#include "testing/conv_reference.h"
#include "testing/emulated_device.h"
#include "testing/tolerances.h"
#include "train/qat_trainer.h"

namespace quantkit::runtime {
namespace {

// What an embedding process (a Python user's torch) or PyTorch's own defaults may have set.
void AllowReducedPrecision() {
  at::Context& ctx = at::globalContext();
  ctx.setAllowTF32CuDNN(true);
  ctx.setFloat32MatmulPrecision("medium");
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
  for (at::Float32Op op : {at::Float32Op::CONV, at::Float32Op::RNN, at::Float32Op::MATMUL}) {
    ctx.setFloat32Precision(at::Float32Backend::CUDA, op, at::Float32Precision::TF32);
  }
  ctx.setFloat32Precision(at::Float32Backend::MKLDNN, at::Float32Op::CONV,
                          at::Float32Precision::BF16);
#endif
}

// x -> Conv(w) -> y with w a float initializer (a trainable parameter for QAT).
ir::Model ConvModel() {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Known(1), ir::Dim::Known(2),
                                                     ir::Dim::Known(4), ir::Dim::Known(4)});
  g.AddInput(x);
  ir::Value* w = g.AddInitializer(
      "w", ir::Tensor::FromVector(ir::DType::kFloat, {2, 2, 1, 1}, std::vector<float>{1, 2, 3, 4}));
  auto conv = g.AddNode("Conv", {x, w}, {"y"}, "", "conv");
  EXPECT_TRUE(conv.ok());
  g.AddOutput((*conv)->output(0));
  return m;
}

std::string Settings() {
  std::string report;
  Float32IsIeee(&report);
  return report;
}

TEST(DeviceNumerics, Float32IsIeeeAfterEveryInterpreterAndTrainerIsCreated) {
  AllowReducedPrecision();
  ASSERT_FALSE(Float32IsIeee()) << "the test could not switch reduced precision on: " << Settings();

  // Interpreter::Create on the default device, on an explicit CPU, on a non-CPU device.
  std::vector<std::pair<std::string, std::optional<Device>>> devices = {
      {"default device", std::nullopt},
      {"cpu", Device{}},
      {"emulated device", testing::EmulatedDevice()}};
  for (const auto& [what, device] : devices) {
    AllowReducedPrecision();
    InterpreterOptions options;
    options.device = device;
    auto interp = Interpreter::Create(ConvModel(), options);
    ASSERT_TRUE(interp.ok()) << interp.status().ToString();
    EXPECT_TRUE(Float32IsIeee()) << "after Interpreter::Create on the " << what << ": "
                                 << Settings();
  }
  // The shared_ptr overload (pipelines share one model between interpreters).
  AllowReducedPrecision();
  auto shared = Interpreter::Create(std::make_shared<const ir::Model>(ConvModel()));
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  EXPECT_TRUE(Float32IsIeee()) << "after Interpreter::Create(shared model): " << Settings();

  // QatTrainer::Create (it creates two interpreters, and sets the numerics itself first).
  AllowReducedPrecision();
  train::TrainerOptions options;
  options.total_steps = 1;
  auto trainer = train::QatTrainer::Create(ConvModel(), ConvModel(), {"w"}, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  EXPECT_TRUE(Float32IsIeee()) << "after QatTrainer::Create: " << Settings();
}

TEST(DeviceNumerics, ReportNamesEverySetting) {
  UseIeeeFloat32();
  std::string report;
  ASSERT_TRUE(Float32IsIeee(&report)) << report;
  for (const char* name :
       {"allow_tf32_cudnn=false", "allow_tf32_cublas=false", "float32_matmul_precision=highest"}) {
    EXPECT_NE(report.find(name), std::string::npos) << report;
  }
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
  for (const char* name : {"cuda.conv.fp32_precision=ieee", "cuda.rnn.fp32_precision=ieee",
                           "cuda.matmul.fp32_precision=ieee", "mkldnn.conv.fp32_precision=ieee"}) {
    EXPECT_NE(report.find(name), std::string::npos) << report;
  }
#endif
}

// The bound of Cuda.ConvolutionIsIeeeFloat32, checked where it can be on a CPU: ATen's float32
// convolution meets it, the same convolution on TF32-rounded inputs does not.
TEST(DeviceNumerics, Tf32BoundSeparatesFloat32FromTf32) {
  const testing::ConvCase c = testing::MakeConvCase();
  const at::Tensor fp32 = at::conv2d(c.x, c.w, {}, 1, 1);
  const at::Tensor tf32 =
      at::conv2d(testing::RoundToTf32(c.x), testing::RoundToTf32(c.w), {}, 1, 1);
  const double e32 = testing::ConvRelativeError(c, fp32);
  const double etf = testing::ConvRelativeError(c, tf32);
  std::printf("float32 %.3g, TF32 inputs %.3g, bound %.3g\n", e32, etf,
              testing::kTf32SeparatingRelError);
  EXPECT_LT(e32, testing::kTf32SeparatingRelError);
  EXPECT_GT(etf, testing::kTf32SeparatingRelError);
  // Round-to-nearest-even on the 13 dropped bits.
  const at::Tensor ties =
      at::tensor({1.0f + 0x1p-11f, 1.0f + 0x1p-10f + 0x1p-11f, -1.0f - 0x1p-12f, 3.0f});
  const at::Tensor want = at::tensor({1.0f, 1.0f + 0x1p-9f, -1.0f, 3.0f});
  EXPECT_TRUE(at::equal(testing::RoundToTf32(ties), want)) << testing::RoundToTf32(ties);
}

}  // namespace
}  // namespace quantkit::runtime
