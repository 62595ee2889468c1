// The distillation loss on a Softmax output's logits (train::DistillTarget): the KL of each
// position's distribution over the class axis, averaged over batch and positions, computed by
// hand here; and, without a target, the KL over everything but the batch axis (the first
// outputs), which for a [batch, time, classes] output is another number. Also the cross-entropy on
// a classifier's logits (TrainerOptions::label_logits) against the probabilities it was taken on.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ir/graph.h"
#include "train/qat_trainer.h"

namespace quantkit::train {
namespace {

constexpr int64_t kBatch = 2, kTime = 3, kClasses = 4;
// The loss is reported in float32 arithmetic; the reference is summed in double.
constexpr double kLossTolerance = 1e-5;

// logits = x * (slope * k + offset) (one weight per class k, broadcast over x's leading axes);
// y = Softmax(logits, the last axis).
ir::Model MulSoftmaxModel(std::vector<int64_t> dims, float slope, float offset) {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  std::vector<ir::Dim> shape;
  for (int64_t d : dims) shape.push_back(ir::Dim::Known(d));
  ir::Value* x = g.CreateValue("x");
  x->type = ir::TypeInfo::Tensor(ir::DType::kFloat, shape);
  g.AddInput(x);
  std::vector<float> w(kClasses);
  for (int64_t i = 0; i < kClasses; ++i) w[i] = slope * static_cast<float>(i) + offset;
  ir::Value* weight =
      g.AddInitializer("W", ir::Tensor::FromVector(ir::DType::kFloat, {kClasses}, w));
  auto mul = g.AddNode("Mul", {x, weight}, {"logits"}, "", "mul");
  if (!mul.ok()) return m;
  auto softmax = g.AddNode("Softmax", {(*mul)->output(0)}, {"y"}, "", "softmax");
  if (!softmax.ok()) return m;
  (*softmax)->SetAttr(ir::Attribute::Int("axis", static_cast<int64_t>(dims.size()) - 1));
  ir::Value* y = (*softmax)->output(0);
  y->type = x->type;
  g.AddOutput(y);
  return m;
}

// [batch, time, classes], W = 0.5 k - 0.7 + shift.
ir::Model SoftmaxModel(float shift) {
  return MulSoftmaxModel({kBatch, kTime, kClasses}, 0.5f, -0.7f + shift);
}

std::vector<float> Input() {
  std::vector<float> x(kBatch * kTime * kClasses);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 5) % 7) / 3.0f - 1.0f;
  return x;
}

std::vector<double> Logits(float shift) {
  const std::vector<float> x = Input();
  std::vector<double> l(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    l[i] = x[i] * (0.5 * static_cast<double>(i % kClasses) - 0.7 + shift);
  }
  return l;
}

// Softmax of `v[begin, begin + n)` with temperature tau.
std::vector<double> Softmax(const std::vector<double>& v, size_t begin, size_t n, double tau) {
  double peak = -INFINITY, sum = 0;
  for (size_t k = 0; k < n; ++k) peak = std::max(peak, v[begin + k] / tau);
  std::vector<double> p(n);
  for (size_t k = 0; k < n; ++k) sum += p[k] = std::exp(v[begin + k] / tau - peak);
  for (double& e : p) e /= sum;
  return p;
}

// KL(teacher || student) of each group of `n` values, summed, divided by `divisor`, * tau^2.
double Kl(const std::vector<double>& student, const std::vector<double>& teacher, size_t n,
          double divisor, double tau) {
  double sum = 0;
  for (size_t begin = 0; begin < student.size(); begin += n) {
    const std::vector<double> p = Softmax(teacher, begin, n, tau),
                              q = Softmax(student, begin, n, tau);
    for (size_t k = 0; k < n; ++k) sum += p[k] * (std::log(p[k]) - std::log(q[k]));
  }
  return sum / divisor * tau * tau;
}

double FirstStepDistillation(const DistillTarget& target, double tau) {
  TrainerOptions o;
  o.distill = DistillLoss::kKl;
  o.temperature = tau;
  o.lr = 1e-3;
  o.distill_on = target;
  auto t = QatTrainer::Create(SoftmaxModel(0.4f), SoftmaxModel(0.0f), {"W"}, o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return NAN;
  TrainingBatch batch{
      {{"x", ir::Tensor::FromVector(ir::DType::kFloat, {kBatch, kTime, kClasses}, Input())}},
      std::nullopt};
  auto r = (*t)->Step(batch, nullptr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->distill : NAN;
}

TEST(DistillationTest, KlOnTheLogitsIsTheMeanOverPositionsOfEachPositionsKl) {
  for (const double tau : {1.0, 2.0}) {
    const double got = FirstStepDistillation({"logits", "logits", 2}, tau);
    const double want = Kl(Logits(0.4f), Logits(0.0f), kClasses, kBatch * kTime, tau);
    EXPECT_NEAR(got, want, kLossTolerance * std::max(1.0, want)) << "tau " << tau;
    EXPECT_GT(want,
              1e-3);  // the student differs from its teacher: a loss that could be 0 tests nothing
  }
}

TEST(DistillationTest, WithoutATargetTheKlIsOverTheFlattenedOutputOfEachSample) {
  const double tau = 1.0;
  // The first outputs are probabilities: the softmax of the flattened [time * classes] per sample.
  const std::vector<double> s = Logits(0.4f), t = Logits(0.0f);
  std::vector<double> ps, pt;
  for (size_t begin = 0; begin < s.size(); begin += kClasses) {
    for (double v : Softmax(s, begin, kClasses, 1.0)) ps.push_back(v);
    for (double v : Softmax(t, begin, kClasses, 1.0)) pt.push_back(v);
  }
  const double got = FirstStepDistillation({}, tau);
  const double want = Kl(ps, pt, kTime * kClasses, kBatch, tau);
  EXPECT_NEAR(got, want, kLossTolerance * std::max(1.0, want));
  EXPECT_GT(std::abs(got - FirstStepDistillation({"logits", "logits", 2}, tau)),
            10 * kLossTolerance);
}

// A classifier: logits = x * W ([batch, classes]), y = Softmax(logits, axis 1).
ir::Model ClassifierModel() { return MulSoftmaxModel({kBatch, kClasses}, 0.9f, -1.1f); }

double FirstStepCrossEntropy(const std::string& label_logits) {
  TrainerOptions o;
  o.distill_weight = 0.0;
  o.label_weight = 1.0;
  o.label_logits = label_logits;
  auto t = QatTrainer::Create(ClassifierModel(), ClassifierModel(), {"W"}, o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return NAN;
  const std::vector<float> x = Input();
  TrainingBatch batch{
      {{"x", ir::Tensor::FromVector(ir::DType::kFloat, {kBatch, kClasses},
                                    std::vector<float>(x.begin(), x.begin() + kBatch * kClasses))}},
      ir::Tensor::FromVector(ir::DType::kInt64, {kBatch}, std::vector<int64_t>{3, 0})};
  auto r = (*t)->Step(batch, nullptr);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->label : NAN;
}

// Cross-entropy = -log softmax(logits)[label], averaged over the batch. On a Softmax output it must
// read the logits: taken on the probabilities, the loss softens them a second time (another
// number, and gradients ~1/classes as large).
TEST(DistillationTest, CrossEntropyOnTheLogitsIsMinusTheLogProbabilityOfTheLabel) {
  const std::vector<float> x = Input();
  std::vector<double> logits(kBatch * kClasses);
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = x[i] * (0.9 * static_cast<double>(i % kClasses) - 1.1);
  const int64_t labels[kBatch] = {3, 0};
  double want = 0, twice = 0;
  for (int64_t b = 0; b < kBatch; ++b) {
    const std::vector<double> p = Softmax(logits, b * kClasses, kClasses, 1.0);
    want -= std::log(p[labels[b]]) / kBatch;
    twice -= std::log(Softmax(p, 0, kClasses, 1.0)[labels[b]]) / kBatch;
  }
  EXPECT_NEAR(FirstStepCrossEntropy("logits"), want, kLossTolerance * std::max(1.0, want));
  EXPECT_NEAR(FirstStepCrossEntropy(""), twice, kLossTolerance * std::max(1.0, twice));
  EXPECT_GT(std::abs(want - twice), 10 * kLossTolerance);
}

TEST(DistillationTest, ACrossEntropyTensorMissingFromTheStudentIsRefusedNamingIt) {
  TrainerOptions o;
  o.label_weight = 1.0;
  o.label_logits = "no_such_logits";
  auto t = QatTrainer::Create(ClassifierModel(), ClassifierModel(), {"W"}, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no_such_logits"), std::string::npos)
      << t.status().ToString();
}

TEST(DistillationTest, ATargetMissingFromAGraphIsRefusedNamingIt) {
  TrainerOptions o;
  o.distill = DistillLoss::kKl;
  o.distill_on = {"logits", "no_such_tensor", 2};
  auto t = QatTrainer::Create(SoftmaxModel(0.4f), SoftmaxModel(0.0f), {"W"}, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no_such_tensor"), std::string::npos)
      << t.status().ToString();
}

}  // namespace
}  // namespace quantkit::train
