// The emulated device (tests/testing/emulated_device.h) behaves as a GPU does for placement:
// values computed there equal the CPU's, host tensors mixed into its math fail, copies work;
// and the interpreter runs on it with every kernel creating its temporaries there.
#include "testing/emulated_device.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cstring>

#include "ir/clone.h"
#include "runtime/device.h"
#include "runtime/interpreter.h"

namespace quantkit::testing {
namespace {

const at::Device kEmu(at::kPrivateUse1, 0);

TEST(EmulatedDevice, ComputesWithAtenOnItsOwnDevice) {
  EmulatedDevice();
  at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3}).to(kEmu);
  EXPECT_EQ(x.device().type(), at::kPrivateUse1);
  at::Tensor y = at::matmul(x, x.t()) + at::ones({2, 2}, x.options());
  EXPECT_EQ(y.device().type(), at::kPrivateUse1);
  at::Tensor host = y.cpu();
  EXPECT_EQ(host.device().type(), at::kCPU);
  EXPECT_TRUE(at::equal(host, at::tensor({6.0f, 15.0f, 15.0f, 51.0f}).reshape({2, 2})));
  // In place and views write through to the same memory.
  at::Tensor row = x.select(0, 1);
  row.mul_(2);
  EXPECT_TRUE(
      at::equal(x.cpu(), at::tensor({0.0f, 1.0f, 2.0f, 6.0f, 8.0f, 10.0f}).reshape({2, 3})));
  // Host reads of values (shape arguments) work, as a synchronising copy does on a GPU.
  EXPECT_EQ(x.sum().item<float>(), 27.0f);
}

TEST(EmulatedDevice, RejectsHostTensorsInDeviceMathAsCudaDoes) {
  EmulatedDevice();
  const int64_t before = EmulatedDeviceMixedCalls();
  at::Tensor x = at::ones({2, 3}, at::TensorOptions().device(kEmu));
  at::Tensor host = at::ones({3, 2});
  try {
    at::Tensor y = at::matmul(x, host);
    FAIL() << "a host matrix in device math was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Expected all tensors to be on the same device"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(EmulatedDeviceMixedCalls(), before + 1);
  // 0-dim host tensors are scalars (CUDA's TensorIterator takes them); copies cross devices.
  at::Tensor s = x * at::scalar_tensor(3.0, at::kFloat);
  EXPECT_EQ(s.device().type(), at::kPrivateUse1);
  at::Tensor dst = at::zeros({2, 3}, x.options());
  dst.copy_(at::full({2, 3}, 5.0f));
  EXPECT_EQ(dst.sum().item<float>(), 30.0f);
  EXPECT_EQ(EmulatedDeviceMixedCalls(), before + 1);
}

// Resize builds its interpolation matrix on the host (double, one row per output position);
// on a GPU that matrix met the device activation in a bmm (PP-OCRv4 det's p2o.Resize.0 on an
// H200, issue 26), and the interpreter's retry could not help: every input was on the device.
TEST(EmulatedDevice, ResizeRunsWhereItsInputIs) {
  const runtime::Device emu = EmulatedDevice();
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    ir::Model m;
    m.SetOpset("", 13);
    ir::Graph& g = *m.graph;
    ir::Value* x = g.CreateValue("x");
    x->type = ir::TypeInfo::Tensor(ir::DType::kFloat, {ir::Dim::Known(1), ir::Dim::Known(2),
                                                       ir::Dim::Known(5), ir::Dim::Known(7)});
    g.AddInput(x);
    ir::Value* roi = g.AddInitializer("roi", ir::Tensor(ir::DType::kFloat, {0}));
    ir::Value* scales = g.AddInitializer(
        "scales",
        ir::Tensor::FromVector(ir::DType::kFloat, {4}, std::vector<float>{1, 1, 2, 0.5f}));
    auto node = g.AddNode("Resize", {x, roi, scales}, {"y"}, "", "p2o.Resize.0");
    ASSERT_TRUE(node.ok());
    (*node)->SetAttr(ir::Attribute::String("mode", mode));
    g.AddOutput((*node)->output(0));
    std::vector<float> v(70);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 11) - 3.5f;
    const ir::Tensor in = ir::Tensor::FromVector(ir::DType::kFloat, {1, 2, 5, 7}, v);
    std::vector<ir::Tensor> outs;
    runtime::ResetMixedDeviceRetries();
    for (const runtime::Device& d : {runtime::Device{}, emu}) {
      runtime::InterpreterOptions options;
      options.device = d;
      auto copy = ir::CloneModel(m);
      ASSERT_TRUE(copy.ok()) << copy.status().ToString();
      auto interp = runtime::Interpreter::Create(std::move(*copy), options);
      ASSERT_TRUE(interp.ok()) << interp.status().ToString();
      auto out = (*interp)->Run({{"x", in}});
      ASSERT_TRUE(out.ok()) << mode << " on " << d.ToString() << ": " << out.status().ToString();
      outs.push_back((*out)[0].tensor);
    }
    EXPECT_EQ(runtime::MixedDeviceRetries(), "") << mode;
    ASSERT_EQ(outs[0].dims(), outs[1].dims());
    EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].nbytes()), 0) << mode;
  }
}

}  // namespace
}  // namespace quantkit::testing
