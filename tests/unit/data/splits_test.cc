// Fixed Fashion-MNIST splits: the documented rule, the committed list, and the JSON reader.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/idx.h"
#include "data/splits.h"

namespace quantkit::data {
namespace {

namespace fs = std::filesystem;

const std::string kSplitsJson = std::string(QK_SOURCE_DIR) + "/data/fashion_mnist_splits.json";

std::vector<int64_t> TrainLabels() {
  auto ds = IdxImageDataset::Open(FashionMnistImagesPath(kFashionMnistDefaultDir, "train"),
                                  FashionMnistLabelsPath(kFashionMnistDefaultDir, "train"));
  return ds.ok() ? ds->labels() : std::vector<int64_t>{};
}

std::vector<int64_t> CountPerClass(const std::vector<int64_t>& indices,
                                   const std::vector<int64_t>& labels) {
  std::vector<int64_t> counts(10, 0);
  for (int64_t i : indices) ++counts[labels[i]];
  return counts;
}

TEST(SplitMix64, ReferenceOutputs) {
  // First outputs of the reference splitmix64.c seeded with 0 (and of qkdev/zoo/data.py).
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64Next(&state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(SplitMix64Next(&state), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(SplitMix64Next(&state), 0x06c45d188009454fULL);
}

TEST(FashionMnistSplits, RuleReproducesTheCommittedList) {
  const auto labels = TrainLabels();
  if (labels.empty()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto computed = ComputeSplits(labels, FashionMnistSplitSpec());
  ASSERT_TRUE(computed.ok()) << computed.status().ToString();
  auto committed = ReadSplitsJson(kSplitsJson);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(computed->calib, committed->calib);
  EXPECT_EQ(computed->val, committed->val);
  EXPECT_EQ(computed->train, committed->train);
  EXPECT_EQ(committed->source_count, kFashionMnistTrainCount);
}

TEST(FashionMnistSplits, SizesBalanceAndDisjointness) {
  const auto labels = TrainLabels();
  if (labels.empty()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  auto s = ReadSplitsJson(kSplitsJson);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(static_cast<int64_t>(s->calib.size()), kFashionMnistCalibCount);
  EXPECT_EQ(static_cast<int64_t>(s->val.size()), kFashionMnistValCount);
  EXPECT_EQ(static_cast<int64_t>(s->train.size()), 60000 - 2048 - 5000);
  EXPECT_EQ(CountPerClass(s->calib, labels), FashionMnistSplitSpec().calib_per_class);
  EXPECT_EQ(CountPerClass(s->val, labels), std::vector<int64_t>(10, 500));

  std::vector<int64_t> all;
  for (const auto* part : {&s->calib, &s->val, &s->train}) {
    EXPECT_TRUE(std::is_sorted(part->begin(), part->end()));
    all.insert(all.end(), part->begin(), part->end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "splits overlap";
  EXPECT_EQ(static_cast<int64_t>(all.size()),
            kFashionMnistTrainCount);  // and together cover all 60,000
}

TEST(ComputeSplits, RejectsLabelsOutsideTheSpec) {
  SplitSpec spec{7, {1, 1}, {1, 1}};
  EXPECT_EQ(ComputeSplits({0, 1, 2}, spec).status().code(), StatusCode::kInvalidArgument);
  // Class 1 has one image but the spec wants two: a silent short split would be unbalanced.
  EXPECT_EQ(ComputeSplits({0, 0, 1}, spec).status().code(), StatusCode::kInvalidArgument);
  auto ok = ComputeSplits({0, 0, 1, 1, 0}, spec);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->calib.size() + ok->val.size() + ok->train.size(), 5u);
}

class SplitsJsonFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() /
             ("qk_splits_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json"))
                .string();
  }
  void TearDown() override { fs::remove(path_); }
  Status Read(const std::string& text) {
    std::ofstream(path_) << text;
    return ReadSplitsJson(path_).status();
  }
  std::string path_;
};

TEST_F(SplitsJsonFiles, ValidMinimalFile) {
  EXPECT_TRUE(Read(R"({"version":1,"source_count":5,"calib":[0,3],"val":[1]})").ok());
}

TEST_F(SplitsJsonFiles, HostileContent) {
  struct Case {
    const char* text;
    StatusCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"not json", StatusCode::kInvalidModel, "not a JSON object"},
      {R"({"version":2,"source_count":5,"calib":[],"val":[]})", StatusCode::kUnsupported,
       "version 2"},
      {R"({"version":1,"source_count":5,"calib":[],"val":[],"extra":1})", StatusCode::kInvalidModel,
       "unknown key 'extra'"},
      {R"({"version":1,"source_count":5,"calib":[5],"val":[]})", StatusCode::kInvalidModel,
       "out of range"},
      {R"({"version":1,"source_count":5,"calib":[2,1],"val":[]})", StatusCode::kInvalidModel,
       "not strictly ascending"},
      {R"({"version":1,"source_count":5,"calib":[1,1],"val":[]})", StatusCode::kInvalidModel,
       "not strictly ascending"},
      {R"({"version":1,"source_count":5,"calib":[1,2],"val":[2]})", StatusCode::kInvalidModel,
       "in both"},
      {R"({"version":1,"source_count":5,"calib":["1"],"val":[]})", StatusCode::kInvalidModel,
       "non-integer"},
      {R"({"version":1,"calib":[],"val":[]})", StatusCode::kInvalidModel, "source_count"},
  };
  for (const Case& c : cases) {
    const Status status = Read(c.text);
    EXPECT_EQ(status.code(), c.code) << c.text << " -> " << status.ToString();
    EXPECT_NE(status.message().find(c.needle), std::string::npos) << status.message();
    EXPECT_EQ(status.message().rfind(path_, 0), 0u) << status.message();
  }
}

}  // namespace
}  // namespace quantkit::data
