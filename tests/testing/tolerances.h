// Named test tolerances, each with its reason (style.md §11). Add yours here.
#pragma once

namespace quantkit::testing {

// Reference calibrators return histogram edges; ours must return the same float32 bits
// (testvectors/README.md "tolerance policy"): no tolerance.
inline constexpr float kEdgeExact = 0.0f;

// pytorch-quantization MSE runs a GPU reduction; the expected values use numpy's pairwise mean.
// The README allows the argmin to move to an adjacent bin when both MSE values agree within
// float32 rounding of the mean (relative).
inline constexpr double kMseNearTieRelative = 1e-6;

// Re-binning the partition-invariant streaming histogram into 2048 reference bins moves each
// value by at most half a fine bin, so a threshold may move by a few reference bins. Allowed
// relative deviation of the TV2 thresholds against the one-shot reference histogram (the
// measured numbers are in docs/histogram-policy.md).
inline constexpr double kRebinThresholdRelative = 0.02;

// The ONNX backend node tests' own defaults (onnx/backend/test/runner: rtol=1e-3, atol=1e-7):
// ATen's float kernels are not bit-identical to numpy's reference, but within these.
inline constexpr double kNodeTestRtol = 1e-3;
inline constexpr double kNodeTestAtol = 1e-7;

// Named per-op exceptions (matched on the case name, see conformance/runner.cc):
// Reductions/activations producing values near 0 after cancellation (e.g. tanh, erf, log of
// softmax over large sums) differ from numpy in the last float bits; onnxruntime uses 1e-5 atol
// for the same cases.
inline constexpr double kCancellationAtol = 1e-5;
// The pytorch-converted/operator suites hold PyTorch's own float32 outputs of whole modules
// (long conv/linear sums); ATen on another build/ISA reorders those sums.
inline constexpr double kPytorchSuiteAtol = 1e-5;

// diagnose: ShareAbove leaves out the fine bin holding the threshold; with 2^14 fine bins per
// sign that is about 1/16384 of uniform data.
inline constexpr double kShareAboveAbs = 1e-3;
// diagnose: Jensen-Shannon divergence of identical histograms is 0 up to float rounding of the
// normalised bins.
inline constexpr double kJsIdenticalAbs = 1e-12;

// Opset upgrade (onnx version converter): the adapters rewrite Softmax-11 as Flatten -> Softmax ->
// Reshape and move Reduce* axes into an input, the same float arithmetic in the same order, so
// the upgraded model's outputs equal the original's up to ATen's reduction order.
inline constexpr double kOpsetUpgradeAtol = 1e-6;

// Training gradients (tests/unit/runtime/training_test.cc) are checked in float64 against central
// differences with step h: truncation error ~h^2 |f'''|, rounding ~1e-16/h, both far below these.
inline constexpr double kFiniteDifferenceStep = 1e-6;
inline constexpr double kGradCheckAtol = 1e-6;
inline constexpr double kGradCheckRtol = 1e-5;
// LSQ scale gradient: a float32 sum of three terms compared with its float64 formula.
inline constexpr double kLsqGradAtol = 1e-5;

// BatchNormalization folded into Conv: the folded weights are rounded to float32 once and the
// conv sums 27 products in another order; outputs of magnitude ~5 agree to a few float32 ulps.
inline constexpr double kBnFoldAtol = 1e-5;

// SmoothQuant's fold (X/s into LayerNormalization's scale and bias, diag(s) W): each value is
// rounded to float32 once more and multiplied back; outputs of magnitude ~10 agree to a few ulps.
inline constexpr double kSmoothFoldRtol = 1e-5;

// GPU vs CPU FP32 model outputs (TF32 off): cuDNN/cuBLAS sum in another order than oneDNN/BLAS;
// the small zoo models' logits (magnitude ~10) agree to about 1e-5 relative.
inline constexpr double kGpuFp32Rtol = 1e-4;
inline constexpr double kGpuFp32Atol = 1e-4;
// A float32 convolution against float64, error per element relative to the sum of |w x| of its
// terms (testing/conv_reference.h): IEEE float32 measures 2.4e-7 on its case, TF32 inputs
// 1.1e-4. A GPU result above this bound is TF32 (or worse), not summation order.
inline constexpr double kTf32SeparatingRelError = 1e-5;
// Device parity (tests/conformance: every node case, zoo and real model on each device against
// the CPU's own outputs): float outputs within
//   |device - cpu| <= kDeviceParityRtol * |cpu| + kDeviceParityScaleAtol * max |cpu|
// (max over the output's finite values). Devices differ from the CPU by summation order
// (cuDNN/cuBLAS vs oneDNN/BLAS: about sqrt(K) float32 ulps of a K-term sum's scale, K up to a few
// thousand in these cases, so ~1e-6 of the output's scale) and by the last ulps of
// transcendental functions (CUDA's expf/tanhf/erff: <= 2 ulp ~ 2.4e-7 relative). TF32 products
// (2^-11 relative per term) exceed both bounds. Integer, bool and shape outputs must be equal.
inline constexpr double kDeviceParityRtol = 1e-4;
inline constexpr double kDeviceParityScaleAtol = 1e-5;
// GPU vs CPU calibration amax (max method) of a whole model: activations differ by summation
// order only, so each tensor's max moves by a few float ulps of its magnitude.
inline constexpr double kGpuAmaxRtol = 1e-4;

// Channels-last execution (runtime::InterpreterOptions::channels_last) computes the same values
// as NCHW; only the summation order inside oneDNN's convolution and ATen's reductions differs
// (float32 rounding of sums of a few hundred terms of size ~1).
inline constexpr double kChannelsLastRtol = 1e-5;
inline constexpr double kChannelsLastAtol = 1e-5;

// Symmetric int8 (max calibration) on the two or three quantized tensors of a tiny hand-written
// model (tests/unit/analysis/control_flow_quant_test.cc): each Q/DQ moves a value by at most half
// a step, amax/254, and the short conv/tanh chains add a few of those, about 1-2% of the output
// range. A scale that is wrong (another tensor's, or one iteration's instead of all) or a pair in
// the wrong graph shows as tens of percent.
inline constexpr double kInt8TinyModelRelMax = 0.05;

}  // namespace quantkit::testing
