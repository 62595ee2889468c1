// The public API (include/quantkit/) as an outside caller uses it: only quantkit/ headers are
// included here. Calibration in steps from an external batch stream, exact merging of shards,
// several methods from one collection, artifacts, and the errors a caller can provoke.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <vector>

#include "quantkit/calibration.h"
#include "quantkit/pipelines.h"

namespace quantkit {
namespace {

namespace fs = std::filesystem;

const std::string kModel = std::string(QK_SOURCE_DIR) + "/models/zoo/plain_cnn.onnx";

// What a Python iterable of {input: ndarray} batches looks like from C++: owned float arrays
// handed out by reference (keep_alive), in batches of uneven size.
class VectorStream final : public BatchStream {
 public:
  VectorStream(std::vector<std::shared_ptr<std::vector<float>>> batches, std::string input)
      : batches_(std::move(batches)), input_(std::move(input)) {}
  Result<std::optional<InputBatch>> Next() override {
    if (next_ == batches_.size()) return std::optional<InputBatch>();
    const auto& b = batches_[next_++];
    InputBatch batch;
    const int64_t n = static_cast<int64_t>(b->size() / (28 * 28));
    batch.inputs[input_] = ArrayView{type_, {n, 1, 28, 28}, b->data(), b};
    return std::optional<InputBatch>(std::move(batch));
  }
  std::string Describe() const override { return "test vectors"; }
  ElementType type_ = ElementType::kFloat32;

 private:
  std::vector<std::shared_ptr<std::vector<float>>> batches_;
  std::string input_;
  size_t next_ = 0;
};

// Deterministic pseudo-images: batches of the given sizes, seed printed on failure.
std::vector<std::shared_ptr<std::vector<float>>> MakeBatches(const std::vector<int>& sizes,
                                                             uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::vector<std::shared_ptr<std::vector<float>>> out;
  for (int n : sizes) {
    auto b = std::make_shared<std::vector<float>>(static_cast<size_t>(n) * 28 * 28);
    for (float& v : *b) v = pixel(rng);
    out.push_back(b);
  }
  return out;
}

struct Calibrated {
  Model model;
  Sites sites;
  std::string input;
};

Calibrated Load() {
  auto model = LoadModel(kModel);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto sites = FindSites(*model);
  EXPECT_TRUE(sites.ok()) << sites.status().ToString();
  return {*model, *sites, model->input_names().at(0)};
}

TEST(PublicApi, StagesFromAnExternalStreamMergeExactlyAndBuildEveryMethod) {
  const uint32_t seed = 14;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Calibrated c = Load();
  ASSERT_FALSE(c.sites.activations.empty());
  auto all = MakeBatches({5, 3, 8, 1}, seed);

  VectorStream whole(all, c.input);
  auto one_pass = CollectStatistics(c.model, whole, c.sites);
  ASSERT_TRUE(one_pass.ok()) << one_pass.status().ToString();
  EXPECT_EQ(one_pass->samples(), 17);

  // Two shards, merged in the other order: the same statistics as one pass.
  VectorStream first({all[0], all[1]}, c.input), second({all[2], all[3]}, c.input);
  auto a = CollectStatistics(c.model, first, c.sites);
  auto b = CollectStatistics(c.model, second, c.sites);
  ASSERT_TRUE(a.ok() && b.ok());
  auto merged = b->Merge(*a);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->samples(), 17);
  EXPECT_EQ(merged->Serialize(), one_pass->Serialize());

  // Serialized and parsed back (a rank sending its shard): same bytes.
  auto parsed = Statistics::Parse(a->Serialize(), "shard a");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->Serialize(), a->Serialize());

  // Several methods from one collection; each amax agrees with the statistics' own answer.
  for (const char* method : {"max", "entropy", "percentile:99.9", "mse"}) {
    auto built = BuildPlan(*merged, c.sites, {method, {}});
    ASSERT_TRUE(built.ok()) << method << ": " << built.status().ToString();
    EXPECT_EQ(built->plan.method(), method);
    for (const std::string& tensor : c.sites.activations) {
      auto entry = built->plan.Find(tensor);
      ASSERT_TRUE(entry.has_value()) << tensor;
      auto amax = merged->Amax(tensor, method);
      ASSERT_TRUE(amax.ok()) << amax.status().ToString();
      if (entry->quantized) {
        EXPECT_EQ(entry->amax.at(0), *amax) << method << " " << tensor;
      }
    }
  }
}

// The statistics do not depend on how the caller batches: ATen picks its summation order by batch
// size, so without one sample per run (data/sample_split.h) the same 17 samples batched as
// 5+3+8+1 and as 17 single samples gave activations, and so histograms, that differed in the last
// bits.
TEST(PublicApi, StreamStatisticsDoNotDependOnTheCallersBatching) {
  const uint32_t seed = 1414;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Calibrated c = Load();
  auto uneven = MakeBatches({5, 3, 8, 1}, seed);
  std::vector<std::shared_ptr<std::vector<float>>> singles;
  for (const auto& b : uneven) {
    for (size_t at = 0; at < b->size(); at += 28 * 28) {
      singles.push_back(std::make_shared<std::vector<float>>(
          b->begin() + static_cast<std::ptrdiff_t>(at),
          b->begin() + static_cast<std::ptrdiff_t>(at + 28 * 28)));
    }
  }
  ASSERT_EQ(singles.size(), 17u);
  VectorStream batched(uneven, c.input), one_by_one(singles, c.input);
  auto a = CollectStatistics(c.model, batched, c.sites);
  auto b = CollectStatistics(c.model, one_by_one, c.sites);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->samples(), 17);
  EXPECT_EQ(a->Serialize(), b->Serialize());
}

// The push collector is the pull one's engine: the same batches observed one by one give the
// stream's bytes; samples that do not fill a run wait for Finish(); arrays of the model's layout
// are read in place; a finished pass and a spec mixed with batches are refused.
TEST(PublicApi, StatisticsCollectorIsFedBatchByBatch) {
  const uint32_t seed = 1415;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Calibrated c = Load();
  auto batches = MakeBatches({5, 3, 8, 1}, seed);
  VectorStream stream(batches, c.input);
  auto pulled = CollectStatistics(c.model, stream, c.sites);
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();

  CollectOptions options;
  options.run_batch = 4;
  VectorStream again(batches, c.input);
  auto pulled4 = CollectStatistics(c.model, again, c.sites, options);
  ASSERT_TRUE(pulled4.ok()) << pulled4.status().ToString();

  for (int64_t run_batch : {int64_t{0}, int64_t{4}}) {
    SCOPED_TRACE(testing::Message() << "run_batch " << run_batch);
    options.run_batch = run_batch;
    auto collector = StatisticsCollector::Create(c.model, c.sites, options);
    ASSERT_TRUE(collector.ok()) << collector.status().ToString();
    EXPECT_EQ(collector->input_names(), c.model.input_names());
    EXPECT_EQ(collector->run_batch(), run_batch == 0 ? 8 : run_batch);
    VectorStream source(batches, c.input);
    while (true) {
      auto batch = source.Next();
      ASSERT_TRUE(batch.ok());
      if (!*batch) break;
      if (collector->batches() == 0) {  // the caller's memory, not a copy
        auto conformed = collector->Conform(**batch);
        ASSERT_TRUE(conformed.ok()) << conformed.status().ToString();
        EXPECT_EQ(conformed->inputs.at(c.input).data, (*batch)->inputs.at(c.input).data);
      }
      ASSERT_TRUE(collector->Observe(**batch).ok());
    }
    EXPECT_EQ(collector->samples(), 17);
    EXPECT_EQ(collector->batches(), 4);
    auto stats = collector->Finish("test vectors");
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats->Serialize(), (run_batch == 0 ? pulled : pulled4)->Serialize());
    EXPECT_EQ(stats->samples(), 17);
    EXPECT_EQ(stats->data_description(), "test vectors (17 samples in 4 batches)");
    EXPECT_EQ(stats->data_fingerprint().rfind("sha256:", 0), 0u) << stats->data_fingerprint();
    EXPECT_FALSE(collector->Finish("again").ok());
    EXPECT_FALSE(collector->Observe(InputBatch{}).ok());
  }

  // Checks name the batch; the CLI's messages.
  auto collector = StatisticsCollector::Create(c.model, c.sites);
  ASSERT_TRUE(collector.ok());
  VectorStream wrong_name(MakeBatches({2}, 1), "x");
  Status bad = collector->Observe(**wrong_name.Next());
  EXPECT_NE(
      bad.message().find("batch 0: 'x' is not an input of the model (inputs: " + c.input + ")"),
      std::string::npos)
      << bad.message();
  // A data spec is read whole, never mixed with batches.
  VectorStream one(MakeBatches({2}, 2), c.input);
  ASSERT_TRUE(collector->Observe(**one.Next()).ok());
  Status mixed = collector->ObserveDataSpec("fashion-mnist:calib");
  EXPECT_EQ(mixed.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.message().find("read whole"), std::string::npos) << mixed.message();

  options.run_batch = -1;
  EXPECT_EQ(StatisticsCollector::Create(c.model, c.sites, options).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PublicApi, WriteArtifactsAndReadThePlanBack) {
  Calibrated c = Load();
  VectorStream stream(MakeBatches({4, 4}, 7), c.input);
  auto stats = CollectStatistics(c.model, stream, c.sites);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto built = BuildPlan(*stats, c.sites, {"entropy", {}});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const fs::path dir = fs::path(testing::TempDir()) / "qk_public_api_artifacts";
  fs::remove_all(dir);
  auto written = WriteArtifacts(c.model, built->plan, dir.string());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->written.size(), 4u);
  EXPECT_GT(written->activation_pairs, 0);
  EXPECT_GT(written->weight_pairs, 0);
  for (const std::string& f : written->written) EXPECT_TRUE(fs::exists(f)) << f;

  auto json = Plan::Read((dir / "plan.json").string());
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_EQ(json->ToJson(), built->plan.ToJson());
  // The Q/DQ model's scales are the plan's activation scales, stored in FP16 (the default float
  // dtype, issue 29): each the plan's FP32 scale rounded to nearest, within half an FP16 ulp
  // (2^-11 relative for these normal scales; docs/strongly-typed.md).
  auto extracted = Plan::Read((dir / "model.qdq.onnx").string());
  ASSERT_TRUE(extracted.ok()) << extracted.status().ToString();
  int rounded = 0;
  for (const std::string& tensor : c.sites.activations) {
    auto want = built->plan.Find(tensor);
    auto got = extracted->Find(tensor);
    ASSERT_TRUE(want && got) << tensor;
    if (!want->quantized) continue;
    ASSERT_EQ(got->scale.size(), want->scale.size()) << tensor;
    for (size_t i = 0; i < want->scale.size(); ++i) {
      EXPECT_LE(std::fabs(got->scale[i] - want->scale[i]), std::ldexp(want->scale[i], -11))
          << tensor;
      rounded += got->scale[i] != want->scale[i];
    }
  }
  EXPECT_GT(rounded, 0) << "every scale written exactly: not FP16 scales";
}

TEST(PublicApi, CallerMistakesAreErrorsNamingWhatIsWrong) {
  Calibrated c = Load();
  // Wrong dtype: refused before any compute, naming the input (not silently converted).
  VectorStream wrong_type(MakeBatches({2}, 1), c.input);
  wrong_type.type_ = ElementType::kFloat64;
  auto r = CollectStatistics(c.model, wrong_type, c.sites);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(c.input), std::string::npos) << r.status().message();

  // An input name the model does not have.
  VectorStream wrong_name(MakeBatches({2}, 1), "not_an_input");
  r = CollectStatistics(c.model, wrong_name, c.sites);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not_an_input"), std::string::npos) << r.status().message();

  // An empty stream has no statistics to give.
  VectorStream empty({}, c.input);
  EXPECT_FALSE(CollectStatistics(c.model, empty, c.sites).ok());

  // Names that match nothing are errors, not silent no-ops.
  Placement placement;
  placement.exclude_nodes = {"no_such_node"};
  auto sites = FindSites(c.model, placement);
  ASSERT_FALSE(sites.ok());
  EXPECT_EQ(sites.status().code(), StatusCode::kNotFound);

  VectorStream stream(MakeBatches({2}, 3), c.input);
  auto stats = CollectStatistics(c.model, stream, c.sites);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto plan = BuildPlan(*stats, c.sites, {"max", {{"no_such_tensor", "entropy"}}});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
  plan = BuildPlan(*stats, c.sites, {"kl", {}});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("kl"), std::string::npos);
  EXPECT_FALSE(Statistics::Parse("not json", "bad.qkstats").ok());
}

// The clipping warning of `quantkit calibrate` (one per plan, naming the worst tensor) comes from
// the one plan building, so the public BuildPlan gives it too; max clips nothing and stays quiet.
TEST(PublicApi, BuildPlanWarnsWhenAMethodClipsWhatMaxKeeps) {
  Calibrated c = Load();
  VectorStream stream(MakeBatches({4, 4}, 21), c.input);
  auto stats = CollectStatistics(c.model, stream, c.sites);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto count_clipping = [](const std::vector<std::string>& warnings) {
    int n = 0;
    for (const std::string& w : warnings)
      n += w.find("clip more than 1% of their values") != std::string::npos;
    return n;
  };
  auto max = BuildPlan(*stats, c.sites, {"max", {}});
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  EXPECT_EQ(count_clipping(max->warnings), 0);
  auto clipping = BuildPlan(*stats, c.sites, {"percentile:90", {}});
  ASSERT_TRUE(clipping.ok()) << clipping.status().ToString();
  ASSERT_EQ(count_clipping(clipping->warnings), 1);
  bool names_a_site = false;
  for (const std::string& w : clipping->warnings) {
    for (const std::string& a : c.sites.activations) {
      names_a_site =
          names_a_site || w.find("worst '" + a + "' with percentile:90") != std::string::npos;
    }
  }
  EXPECT_TRUE(names_a_site);
}

TEST(PublicApi, DataSpecStreamMatchesTheCliCalibration) {
  Calibrated c = Load();
  DataSpecOptions spec;
  spec.samples = 64;
  spec.batch_size = 16;
  auto stream = OpenDataSpec(c.model, "fashion-mnist:calib", spec);
  if (!stream.ok() && stream.status().code() == StatusCode::kNotFound) {
    GTEST_SKIP() << "Debian's fashion-mnist is not installed: " << stream.status().message();
  }
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ((*stream)->size_hint(), 64);
  auto stats = CollectStatistics(c.model, **stream, c.sites);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->samples(), 64);
  auto built = BuildPlan(*stats, c.sites, {"percentile", {}});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(built->plan.method(), "percentile:99.99");
  EXPECT_GT(built->plan.tensors().size(), c.sites.activations.size());  // weights too
}

// The one-call Calibrate is the stages' calibration: the same scales as BuildPlan on the same
// statistics, plus what `quantkit calibrate -o` writes (summary.txt too) and --stats.
TEST(PublicApi, CalibrateInOneCallGivesTheStagesPlanAndTheCliFiles) {
  Calibrated c = Load();
  VectorStream stream(MakeBatches({6, 2}, 1401), c.input);
  auto stats = CollectStatistics(c.model, stream, c.sites);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto staged = BuildPlan(*stats, c.sites, {"entropy", {}});
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();

  const fs::path dir = fs::path(testing::TempDir()) / "qk_public_api_calibrate";
  fs::remove_all(dir);
  CalibrateOptions options;
  options.model = kModel;
  options.statistics = *stats;
  options.methods.method = "entropy";
  options.output_dir = (dir / "out").string();
  options.stats_out = (dir / "shard.qkstats").string();
  ASSERT_TRUE(CheckCalibrateOptions(options).ok());
  auto report = Calibrate(options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  // The artifacts of `quantkit calibrate -o`, and the --stats file.
  for (const char* name :
       {"model.qdq.onnx", "calib.cache", "ranges.txt", "plan.json", "summary.txt"}) {
    EXPECT_TRUE(fs::exists(dir / "out" / name)) << name;
  }
  EXPECT_EQ(report->written.size(), 6u);
  EXPECT_FALSE(report->summary.empty());
  EXPECT_EQ(report->plan.num_quantized(), staged->plan.num_quantized());
  for (const TensorScale& want : staged->plan.tensors()) {
    auto got = report->plan.Find(want.tensor);
    ASSERT_TRUE(got.has_value()) << want.tensor;
    EXPECT_EQ(got->scale, want.scale) << want.tensor;
    EXPECT_EQ(got->role, want.weight ? "weight" : "activation") << want.tensor;
    EXPECT_EQ(got->dtype, "int8") << want.tensor;
  }
  // --stats wrote the statistics it calibrated from; reading them back checks the model.
  auto saved = Statistics::Load({options.stats_out}, c.model.sha256());
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  EXPECT_EQ(saved->Serialize(), stats->Serialize());

  // Bad options fail before anything is read (the model does not even exist here).
  CalibrateOptions bad;
  bad.model = (dir / "missing.onnx").string();
  bad.methods.method = "median";
  Status s = CheckCalibrateOptions(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("median"), std::string::npos) << s.message();
  bad.methods.method = "max";
  bad.cache.trt_version = "eight";
  EXPECT_FALSE(CheckCalibrateOptions(bad).ok());
  bad.cache.trt_version = "8.6.1";
  bad.run_batch = -1;
  EXPECT_FALSE(CheckCalibrateOptions(bad).ok());
  EXPECT_FALSE(fs::exists(dir / "missing.onnx"));
}

TEST(PublicApi, StatisticsRangesAmaxesAndShardFiles) {
  Calibrated c = Load();
  auto batches = MakeBatches({3, 5}, 1402);
  VectorStream first({batches[0]}, c.input), second({batches[1]}, c.input), whole(batches, c.input);
  auto a = CollectStatistics(c.model, first, c.sites);
  auto b = CollectStatistics(c.model, second, c.sites);
  auto all = CollectStatistics(c.model, whole, c.sites);
  ASSERT_TRUE(a.ok() && b.ok() && all.ok());

  auto entropy = all->Amax("entropy");
  ASSERT_TRUE(entropy.ok()) << entropy.status().ToString();
  EXPECT_EQ(entropy->size(), all->tensors().size());
  for (const std::string& tensor : all->tensors()) {
    auto one = all->Amax(tensor, "entropy");
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(entropy->at(tensor), *one) << tensor;
    auto range = all->Range(tensor);
    ASSERT_TRUE(range.ok()) << range.status().ToString();
    EXPECT_EQ(range->amax, *all->AbsMax(tensor)) << tensor;
    EXPECT_LE(range->min, range->max) << tensor;
    EXPECT_GT(range->count, 0) << tensor;
    EXPECT_EQ(range->nan_count + range->inf_count, 0) << tensor;
  }
  EXPECT_FALSE(all->Amax("median").ok());
  auto missing = all->Range("no_such_tensor");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  // Shards saved by two ranks, loaded together: exactly one pass; another model's hash is refused.
  const fs::path dir = fs::path(testing::TempDir()) / "qk_public_api_shards";
  fs::create_directories(dir);
  const std::string pa = (dir / "a.qkstats").string(), pb = (dir / "b.qkstats").string();
  ASSERT_TRUE(a->Save(pa).ok() && b->Save(pb).ok());
  auto loaded = Statistics::Load({pa, pb}, c.model.sha256());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->Serialize(), all->Serialize());
  EXPECT_EQ(loaded->data_description(), "statistics from " + pa + " " + pb);
  EXPECT_FALSE(Statistics::Load({pa}, std::string(64, '0')).ok());
  EXPECT_FALSE(Statistics::Load(std::vector<std::string>{}).ok());
}

TEST(PublicApi, PlansEditedByHandWrittenInEachFormatAndAsAQdqModel) {
  Calibrated c = Load();
  const fs::path dir = fs::path(testing::TempDir()) / "qk_public_api_plan_files";
  fs::remove_all(dir);
  fs::create_directories(dir);

  // By hand: a copy gains the entry, the original is unchanged; a zero range stays in float.
  const Plan empty = Plan::Empty();
  EXPECT_EQ(empty.num_quantized(), 0);
  auto edited = empty.WithActivationAmax("t", 2.54f, "hand");
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  EXPECT_TRUE(empty.tensors().empty());
  ASSERT_EQ(edited->num_quantized(), 1);
  EXPECT_FLOAT_EQ(edited->Find("t")->scale.at(0), 2.54f / 127.0f);
  EXPECT_EQ(edited->Find("t")->source, "hand");
  auto zero = edited->WithActivationAmax("z", 0.0f, "hand");
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->Find("z")->quantized);
  EXPECT_FALSE(zero->Find("z")->reason.empty());

  // The format is the caller's, whatever the extension; the cache header is the caller's too.
  const std::string ranges = (dir / "ranges.dat").string(), cache = (dir / "plan.bin").string();
  ASSERT_TRUE(edited->Write(ranges, PlanFormat::kRangesText).ok());
  ASSERT_TRUE(edited->Write(cache, PlanFormat::kTrtCache, {"8.6.1", "MinMaxCalibration"}).ok());
  auto text = edited->CacheText({"8.6.1", "MinMaxCalibration"});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->rfind("TRT-8601-MinMaxCalibration\n", 0), 0u) << *text;
  std::ifstream in(cache, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), *text);
  std::ifstream rin(ranges);
  std::string line;
  ASSERT_TRUE(std::getline(rin, line));
  EXPECT_EQ(line.rfind("t:", 0), 0u) << line;
  EXPECT_FALSE(edited->CacheText({"eight", "MinMaxCalibration"}).ok());
  EXPECT_FALSE(edited->Write(cache, PlanFormat::kTrtCache, {"8.6.1", "Legacy"}).ok());
  // The cache header applies to caches only.
  EXPECT_TRUE(
      edited->Write((dir / "p.json").string(), PlanFormat::kJson, {"8.6.1", "Legacy"}).ok());

  // The Q/DQ model alone: the pairs WriteArtifacts inserts; a float node loses its input pair.
  VectorStream stream(MakeBatches({4}, 1403), c.input);
  auto stats = CollectStatistics(c.model, stream, c.sites);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  auto built = BuildPlan(*stats, c.sites);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto artifacts = WriteArtifacts(c.model, built->plan, (dir / "all").string());
  auto qdq = WriteQdqModel(c.model, built->plan, (dir / "q.onnx").string());
  ASSERT_TRUE(artifacts.ok() && qdq.ok()) << qdq.status().ToString();
  EXPECT_EQ(qdq->written, std::vector<std::string>{(dir / "q.onnx").string()});
  EXPECT_EQ(qdq->activation_pairs, artifacts->activation_pairs);
  EXPECT_EQ(qdq->weight_pairs, artifacts->weight_pairs);
  auto extracted = Plan::Read((dir / "q.onnx").string());
  ASSERT_TRUE(extracted.ok()) << extracted.status().ToString();
  EXPECT_GT(extracted->num_quantized(), 0);
  const Plan fewer =
      built->plan.WithFloatNodes({c.sites.sites.front().consumer}, "kept by the test");
  auto fewer_qdq = WriteQdqModel(c.model, fewer, (dir / "q2.onnx").string());
  ASSERT_TRUE(fewer_qdq.ok()) << fewer_qdq.status().ToString();
  EXPECT_LT(fewer_qdq->activation_pairs + fewer_qdq->weight_pairs,
            qdq->activation_pairs + qdq->weight_pairs);
}

}  // namespace
}  // namespace quantkit
