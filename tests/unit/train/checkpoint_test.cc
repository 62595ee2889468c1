// QAT checkpoints (train/checkpoint_io.h): an .npz archive read without libtorch's parsers. A run
// stopped, saved and resumed reaches the same parameters bit for bit as one that never stopped
// (AdamW and SGD with momentum); a checkpoint of another optimizer or model is refused naming the
// file; every single-byte edit of a valid checkpoint either loads or fails with a Status (never a
// crash), and a failed load leaves the trainer as it was.
#include <gtest/gtest.h>
#include <zip.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "testing/conv_model.h"
#include "train/qat_trainer.h"

namespace quantkit::train {
namespace {

TrainingBatch Batch(int seed) {
  std::vector<float> x(2 * 16);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 7 + seed * 3) % 11) / 5.0f - 1.0f;
  return {{{"x", ir::Tensor::FromVector(ir::DType::kFloat, {2, 1, 4, 4}, x)}}, std::nullopt};
}

std::unique_ptr<QatTrainer> Trainer(OptimizerKind kind, float shift = 0.5f) {
  TrainerOptions o;
  o.optimizer = kind;
  o.lr = 1e-2;
  o.total_steps = 4;
  auto t =
      QatTrainer::Create(testing::TinyConvModel(shift), testing::TinyConvModel(0.0f), {"W"}, o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(*t);
}

std::vector<float> Weights(const QatTrainer& t) {
  auto p = t.Parameters();
  EXPECT_TRUE(p.ok());
  const ir::Tensor& w = (*p)[0].tensor;
  return std::vector<float>(w.data_as<float>(), w.data_as<float>() + w.numel());
}

class CheckpointTest : public ::testing::TestWithParam<OptimizerKind> {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "qk_checkpoint_XXXXXX";
    ASSERT_NE(mkdtemp(&templ[0]), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_P(CheckpointTest, AResumedRunEqualsOneThatNeverStopped) {
  auto straight = Trainer(GetParam());
  for (int s = 0; s < 4; ++s) ASSERT_TRUE(straight->Step(Batch(s)).ok());

  auto first = Trainer(GetParam());
  for (int s = 0; s < 2; ++s) ASSERT_TRUE(first->Step(Batch(s)).ok());
  CheckpointExtras extras;
  extras.values["best_metric"] = 0.75;
  extras.best = *first->Parameters();
  ASSERT_TRUE(first->SaveCheckpoint(Path("c.npz"), extras).ok());

  auto resumed = Trainer(GetParam());
  auto loaded = resumed->LoadCheckpoint(Path("c.npz"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(resumed->steps_done(), 2);
  EXPECT_EQ(loaded->values.at("best_metric"), 0.75);
  ASSERT_EQ(loaded->best.size(), 1u);
  EXPECT_EQ(loaded->best[0].name, "W");
  for (int s = 2; s < 4; ++s) ASSERT_TRUE(resumed->Step(Batch(s)).ok());
  const std::vector<float> a = Weights(*straight), b = Weights(*resumed);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
      << "the optimizer state did not carry over";
  EXPECT_NE(Weights(*Trainer(GetParam())), a)
      << "training moved nothing: the test would prove nothing";
}

TEST_P(CheckpointTest, EveryOneByteEditLoadsOrFailsCleanly) {
  auto trainer = Trainer(GetParam());
  ASSERT_TRUE(trainer->Step(Batch(0)).ok());
  ASSERT_TRUE(trainer->SaveCheckpoint(Path("good.npz"), {}).ok());
  std::ifstream in(Path("good.npz"), std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(good.size(), 100u);
  auto target = Trainer(GetParam());
  const std::vector<float> before = Weights(*target);
  int loaded = 0;
  for (size_t at = 0; at < good.size(); ++at) {
    std::string edited = good;
    edited[at] = static_cast<char>(edited[at] ^ 0x5a);
    std::ofstream(Path("edited.npz"), std::ios::binary) << edited;
    auto r = target->LoadCheckpoint(Path("edited.npz"));
    if (r.ok()) {
      ++loaded;
      target = Trainer(GetParam());  // back to the state `before` describes
      continue;
    }
    ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument)
        << "byte " << at << ": " << r.status().ToString();
    ASSERT_NE(r.status().message().find("edited.npz"), std::string::npos) << r.status().ToString();
    ASSERT_EQ(Weights(*target), before) << "a failed load changed the trainer (byte " << at << ")";
  }
  // Edits of the npy headers' padding, of unchecked zip fields, or of an extras value still load.
  EXPECT_LT(loaded, static_cast<int>(good.size() / 2));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, CheckpointTest,
                         ::testing::Values(OptimizerKind::kAdamW, OptimizerKind::kSgd),
                         [](const auto& info) {
                           return info.param == OptimizerKind::kSgd ? "Sgd" : "AdamW";
                         });

class CheckpointRefusalTest : public CheckpointTest {};

TEST_F(CheckpointRefusalTest, AnotherOptimizerOrModelIsRefusedNamingTheFile) {
  auto sgd = Trainer(OptimizerKind::kSgd);
  ASSERT_TRUE(sgd->Step(Batch(0)).ok());
  ASSERT_TRUE(sgd->SaveCheckpoint(Path("sgd.npz"), {}).ok());
  auto adamw = Trainer(OptimizerKind::kAdamW);
  auto r = adamw->LoadCheckpoint(Path("sgd.npz"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find("sgd.npz: the checkpoint holds sgd state, this run uses adamw"),
      std::string::npos)
      << r.status().ToString();

  // Another model: W of another shape.
  auto wider = QatTrainer::Create(testing::TinyConvModel(0.5f, 3), testing::TinyConvModel(0.0f, 3),
                                  {"W"}, TrainerOptions{});
  ASSERT_TRUE(wider.ok());
  const std::vector<float> before = Weights(**wider);
  ASSERT_TRUE(Trainer(OptimizerKind::kAdamW)->SaveCheckpoint(Path("narrow.npz"), {}).ok());
  auto other = (*wider)->LoadCheckpoint(Path("narrow.npz"));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find(
                "narrow.npz: 'param/W' is float [2,1,3,3], expected float [3,1,3,3] "
                "(another model or plan?)"),
            std::string::npos)
      << other.status().ToString();
  EXPECT_EQ(Weights(**wider), before);
}

TEST_F(CheckpointRefusalTest, ATorchScriptArchiveOfEarlierReleasesIsNamedNotParsed) {
  // What quantkit wrote before issue 27 (torch::serialize::OutputArchive): a zip of pickles.
  const std::string path = Path("old.pt");
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  ASSERT_NE(z, nullptr);
  const std::string pickle = "\x80\x02}q\x00.";
  zip_file_add(z, "archive/data.pkl", zip_source_buffer(z, pickle.data(), pickle.size(), 0), 0);
  ASSERT_EQ(zip_close(z), 0);
  const Status s = CheckCheckpointFile(path);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("old.pt:archive/data.pkl: not an .npy member"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace quantkit::train
