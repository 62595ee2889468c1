#include "analysis/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

namespace quantkit::analysis {
namespace {

// 3 samples x 3 classes. Reference argmaxes: 0, 1, 2. Output argmaxes: 0, 2, 2. Labels: 0, 1, 1.
const float kRef[] = {3, 1, 0, /**/ 0, 2, 1, /**/ 0, 0, 1};
const float kOut[] = {3, 1, 0, /**/ 0, 1, 2, /**/ 0, 0, 1};
const int64_t kLabels[] = {0, 1, 1};

MetricBatch Batch(const int64_t* labels = kLabels) { return {kOut, kRef, 3, 3, labels, 3}; }

TEST(Metrics, Top1CountsArgmaxEqualToLabel) {
  Top1Metric m;
  m.Reset();
  ASSERT_TRUE(m.Update(Batch()).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 1.0 / 3.0);  // only sample 0 is right
  // Loss in points against an FP32 value: FP32 gets samples 0 and 1 right.
  EXPECT_DOUBLE_EQ(m.Loss(m.Value(), 2.0 / 3.0), 100.0 / 3.0);
}

TEST(Metrics, Top1WithoutLabelsIsAClearError) {
  Top1Metric m;
  Status s = m.Update(Batch(nullptr));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("labelled"), std::string::npos) << s.ToString();
}

// 7 classes: the label's output is beaten by 4 (in the top 5), by 5 (not), or tied with the
// highest (in: ties count in the label's favour).
TEST(Metrics, Top5CountsLabelsAmongTheFiveHighest) {
  const float out[] = {6, 5, 4, 3, 2, 1, 0, /**/ 6, 5, 4, 3, 2, 1, 0, /**/ 6, 6, 0, 0, 0, 0, 0};
  const int64_t labels[] = {4, 5, 1};
  Top5Metric m;
  m.Reset();
  ASSERT_TRUE(m.Update({out, nullptr, 3, 7, labels, 7}).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 2.0 / 3.0);
  EXPECT_EQ(m.total(), 3);
}

// eval used to say this itself; now the metrics do, for every command that scores labels.
TEST(Metrics, ALabelOutsideTheClassesIsAnError) {
  const int64_t labels[] = {0, 3, 1};
  for (Metric* m : std::vector<Metric*>{new Top1Metric(), new Top5Metric()}) {
    std::unique_ptr<Metric> owned(m);
    Status s = m->Update(Batch(labels));
    ASSERT_FALSE(s.ok()) << m->name();
    EXPECT_NE(s.ToString().find("label 3 is outside the model's 3 classes"), std::string::npos)
        << s.ToString();
  }
}

// eval's cosine, SQNR and max |error| through one metric: per-batch states added in order give
// the statistics of one pass over both batches, max |error| included.
TEST(Metrics, OutputErrorStatesAddToTheWholePass) {
  OutputErrorMetric whole, part, total;
  whole.Reset();
  ASSERT_TRUE(whole.Update(Batch()).ok());
  const MetricBatch first{kOut, kRef, 1, 3, nullptr, 3}, rest{kOut + 3, kRef + 3, 2, 3, nullptr, 3};
  total.Reset();
  for (const MetricBatch& b : {first, rest}) {
    part.Reset();
    ASSERT_TRUE(part.Update(b).ok());
    total.AddState(part.State());
  }
  EXPECT_DOUBLE_EQ(total.stats().cosine(), whole.stats().cosine());
  EXPECT_DOUBLE_EQ(total.stats().sqnr_db(), whole.stats().sqnr_db());
  EXPECT_DOUBLE_EQ(total.Value(), whole.Value());
  EXPECT_DOUBLE_EQ(total.stats().max_abs, 1.0);  // |1 - 2| in sample 1
  EXPECT_EQ(total.stats().count, 9);
  EXPECT_FALSE(total.Update({kOut, nullptr, 3, 3, nullptr, 3}).ok());  // needs a reference
}

TEST(Metrics, AgreementComparesArgmaxWithReferenceAcrossBatches) {
  AgreementMetric m;
  m.Reset();
  ASSERT_TRUE(m.Update(Batch(nullptr)).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 2.0 / 3.0);
  const MetricBatch same{kRef, kRef, 3, 3, nullptr, 3};
  ASSERT_TRUE(m.Update(same).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 5.0 / 6.0);
  m.Reset();
  EXPECT_DOUBLE_EQ(m.Value(), 0.0);
}

TEST(Metrics, FrameAgreementComparesEachFrameOfASequence) {
  // The 9 values as one sample of 3 frames x 3 classes: frames 0 and 2 agree, frame 1 does not.
  FrameAgreementMetric m;
  m.Reset();
  ASSERT_TRUE(m.Update({kOut, kRef, 1, 9, nullptr, 3}).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 2.0 / 3.0);
  // Sample-level agreement on the same values sees one 9-way argmax: the frames' disagreement is
  // lost (both argmaxes are value 0, the first 3).
  AgreementMetric whole;
  ASSERT_TRUE(whole.Update({kOut, kRef, 1, 9, nullptr, 3}).ok());
  EXPECT_DOUBLE_EQ(whole.Value(), 1.0);
  // Counts add over batches and states.
  ASSERT_TRUE(m.Update({kOut, kRef, 1, 9, nullptr, 3}).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 4.0 / 6.0);
  // A [batch, classes] class vector (one frame per sample) is refused, naming agreement (issue #48:
  // it reported 1.0000 on a classifier), and so is it for decode_agreement.
  const Status classes = m.Update(Batch(nullptr));
  ASSERT_FALSE(classes.ok());
  EXPECT_NE(classes.message().find("use agreement"), std::string::npos) << classes.message();
  DecodeAgreementMetric decode;
  EXPECT_FALSE(decode.Update(Batch(nullptr)).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 4.0 / 6.0) << "a refused batch counts nothing";
  FrameAgreementMetric merged;
  merged.AddState(m.State());
  EXPECT_DOUBLE_EQ(merged.Value(), m.Value());
  // A width that is not whole frames is an error naming both.
  const Status bad = m.Update({kOut, kRef, 1, 9, nullptr, 4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("9 values per sample are not frames of 4 classes"),
            std::string::npos)
      << bad.message();
}

// Frames of 3 classes (0 the CTC blank, 1 'a', 2 'b') as one-hot rows.
std::vector<float> Frames(const std::vector<int>& argmaxes) {
  std::vector<float> v(argmaxes.size() * 3, 0.0f);
  for (size_t f = 0; f < argmaxes.size(); ++f) v[f * 3 + argmaxes[f]] = 1.0f;
  return v;
}

TEST(Metrics, DecodeAgreementComparesGreedyCtcDecodes) {
  // Sample 0: FP32 "a a - b" and INT8 "a - - b" differ in a frame and both decode to "ab".
  // Sample 1: FP32 "a - a b" decodes to "aab" (the blank separates the repeat), INT8 "a a a b" to
  // "ab": one frame differs there too, and the decodes do not agree.
  std::vector<float> ref = Frames({1, 1, 0, 2, /**/ 1, 0, 1, 2});
  std::vector<float> out = Frames({1, 0, 0, 2, /**/ 1, 1, 1, 2});
  const MetricBatch b{out.data(), ref.data(), 2, 12, nullptr, 3};
  DecodeAgreementMetric m;
  m.Reset();
  ASSERT_TRUE(m.Update(b).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 1.0 / 2.0);
  FrameAgreementMetric frames;  // the same 8 frames: 6 agree, both samples look alike
  ASSERT_TRUE(frames.Update(b).ok());
  EXPECT_DOUBLE_EQ(frames.Value(), 6.0 / 8.0);
  // A decode of blanks only is the empty sequence: it agrees with another such decode.
  std::vector<float> blank = Frames({0, 0, 0, 0});
  ASSERT_TRUE(m.Update({blank.data(), blank.data(), 1, 12, nullptr, 3}).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 2.0 / 3.0);
  DecodeAgreementMetric merged;
  merged.AddState(m.State());
  EXPECT_DOUBLE_EQ(merged.Value(), m.Value());
  // Frames of one class (a blank and nothing else) or a width that is not whole frames: errors.
  for (const int64_t classes : {int64_t{1}, int64_t{5}}) {
    const Status bad = m.Update({out.data(), ref.data(), 1, 12, nullptr, classes});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("decode_agreement"), std::string::npos) << bad.message();
  }
  EXPECT_TRUE(MakeMetric("decode_agreement").ok());
}

TEST(Metrics, RelativeMseIsErrorEnergyOverReferenceEnergy) {
  RelativeMseMetric m;
  m.Reset();
  ASSERT_TRUE(m.Update(Batch()).ok());
  // Sample 1 differs by (0, -1, +1): error energy 2; reference energy 9+1+4+1+1 = 16.
  EXPECT_DOUBLE_EQ(m.Value(), 2.0 / 16.0);
  EXPECT_FALSE(m.higher_is_better());
  EXPECT_DOUBLE_EQ(m.Loss(0.125, 0.0), 0.125);
}

TEST(Metrics, MakeMetricKnowsTheBuiltinsAndRejectsOthers) {
  for (const std::string& n : BuiltinMetricNames()) {
    auto m = MakeMetric(n);
    ASSERT_TRUE(m.ok()) << n;
    EXPECT_EQ((*m)->name(), n);
  }
  EXPECT_FALSE(MakeMetric("top7").ok());
}

TEST(Metrics, ErrorStatsSqnrCosineRelativeMse) {
  ErrorStats e;
  const float ref[] = {1, 2, 2};
  const float out[] = {1, 2, 3};
  e.Add(out, ref, 3);
  EXPECT_DOUBLE_EQ(e.relative_mse(), 1.0 / 9.0);
  EXPECT_NEAR(e.sqnr_db(), 10 * std::log10(9.0), 1e-12);
  EXPECT_NEAR(e.cosine(), 11.0 / (3.0 * std::sqrt(14.0)), 1e-12);
  EXPECT_DOUBLE_EQ(e.max_abs, 1.0);
  ErrorStats exact;
  exact.Add(ref, ref, 3);
  EXPECT_TRUE(std::isinf(exact.sqnr_db()));
  EXPECT_DOUBLE_EQ(exact.cosine(), 1.0);
}

// The per-batch state that distributed analyze/fallback exchange: it round-trips exactly, and
// merging batch parts in batch order is what one process computes for the same batches (so the
// result cannot depend on which rank held which batch). Without Merge's max, max_abs would sum.
TEST(Metrics, ErrorStatsStateRoundTripsAndMergesInOrder) {
  const float ref[] = {0.1f, -2.5f, 3.25f, 1e-3f, 7.0f, -0.3f};
  const float out[] = {0.2f, -2.0f, 3.0f, 0.0f, 6.5f, -0.1f};
  ErrorStats parts[3];
  std::vector<double> rows;
  for (int b = 0; b < 3; ++b) {
    parts[b].Add(out + 2 * b, ref + 2 * b, 2);
    parts[b].AppendState(&rows);
  }
  ASSERT_EQ(rows.size(), 3 * ErrorStats::kStateSize);
  ErrorStats merged, from_rows;
  for (int b = 0; b < 3; ++b) {
    merged.Merge(parts[b]);
    from_rows.Merge(ErrorStats::FromState(rows.data() + b * ErrorStats::kStateSize));
  }
  for (const ErrorStats* e : {&merged, &from_rows}) {
    EXPECT_EQ(e->count, 6);
    EXPECT_EQ(e->max_abs, 0.5);  // |6.5 - 7| and |-2 - -2.5|: the max, not a sum
    EXPECT_EQ(e->err2,
              (parts[0].err2 + parts[1].err2) + parts[2].err2);  // batch order, bit for bit
  }
  EXPECT_EQ(merged.dot, from_rows.dot);
  EXPECT_EQ(merged.ref2, from_rows.ref2);
  EXPECT_EQ(merged.out2, from_rows.out2);
}

// A user-defined metric plugs in through the same interface.
class MeanLogitMetric final : public Metric {
 public:
  std::string name() const override { return "mean_logit"; }
  void Reset() override { sum_ = 0, n_ = 0; }
  Status Update(const MetricBatch& b) override {
    for (int64_t i = 0; i < b.batch * b.width; ++i) sum_ += b.output[i];
    n_ += b.batch * b.width;
    return Status::Ok();
  }
  double Value() const override { return n_ ? sum_ / n_ : 0; }

 private:
  double sum_ = 0;
  int64_t n_ = 0;
};

TEST(Metrics, UserMetricUsesTheDefaultLoss) {
  MeanLogitMetric m;
  m.Reset();
  ASSERT_TRUE(m.Update(Batch()).ok());
  EXPECT_DOUBLE_EQ(m.Value(), 8.0 / 9.0);    // sum of kOut / 9
  EXPECT_DOUBLE_EQ(m.Loss(0.5, 1.0), 50.0);  // higher is better by default: points
}

TEST(Metrics, MakeMetricsBuildsEachNameOrNamesTheUnknownOne) {
  auto ok = MakeMetrics({"top1", "rel-mse"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 2u);
  const std::vector<Metric*> ptrs = MetricPointers(*ok);
  EXPECT_EQ(ptrs[1], (*ok)[1].get());
  auto bad = MakeMetrics({"top1", "bogus"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'bogus'"), std::string::npos) << bad.status().message();
  EXPECT_EQ(DefaultMetricName(/*has_labels=*/true, /*class_output=*/true), "top1");
  EXPECT_EQ(DefaultMetricName(/*has_labels=*/false, /*class_output=*/true), "agreement");
}

}  // namespace
}  // namespace quantkit::analysis
