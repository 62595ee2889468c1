// Fuzzes `qat --resume`'s input: a QAT checkpoint file, read by train::CheckCheckpointFile and
// QatTrainer::LoadCheckpoint (an .npz archive: libzip and quantkit's .npy parser,
// train/checkpoint_io.h; libtorch parses none of it). Properties: no crash, no sanitizer report, no
// abort, no uncaught exception (every failure is a Status naming the file); a checkpoint that loads
// saves again and that file loads again (round trip).
//
// Input: first byte 0: the rest is the file itself. Otherwise the rest is a list of edits
// (3 bytes: offset high, offset low, xor value) applied to a valid checkpoint of the fuzzer's own
// trainer, so that mutations reach past the zip directory into the .npy headers and the tensors.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "testing/conv_model.h"
#include "train/qat_trainer.h"

namespace {

using namespace quantkit;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
}

struct Fixture {
  std::unique_ptr<train::QatTrainer> trainer;
  std::string valid;  // the bytes of a checkpoint this trainer wrote
  std::string dir;
};

Fixture& Get() {
  static Fixture* f = [] {
    auto* fx = new Fixture();
    fx->dir = "/tmp/quantkit_checkpoint_fuzzer_" + std::to_string(::getpid());
    ::mkdir(fx->dir.c_str(), 0755);
    train::TrainerOptions options;
    options.total_steps = 10;
    auto trainer = train::QatTrainer::Create(testing::TinyConvModel(), testing::TinyConvModel(),
                                             {"W"}, options);
    if (!trainer.ok()) {
      std::fprintf(stderr, "checkpoint_fuzzer: %s\n", trainer.status().ToString().c_str());
      std::abort();
    }
    fx->trainer = std::move(*trainer);
    const std::string seed = fx->dir + "/seed.npz";
    train::CheckpointExtras extras;
    extras.values["best_metric"] = 0.5;
    if (!fx->trainer->SaveCheckpoint(seed, extras).ok()) std::abort();
    fx->valid = ReadFile(seed);
    return fx;
  }();
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& fx = Get();
  if (size == 0) return 0;
  const std::string path = fx.dir + "/input.npz";
  if (data[0] == 0) {
    WriteFile(path, data + 1, size - 1);
  } else {
    std::string edited = fx.valid;
    for (size_t i = 1; i + 2 < size; i += 3) {
      const size_t offset = ((static_cast<size_t>(data[i]) << 8) | data[i + 1]) % edited.size();
      edited[offset] = static_cast<char>(edited[offset] ^ data[i + 2]);
    }
    WriteFile(path, reinterpret_cast<const uint8_t*>(edited.data()), edited.size());
  }
  if (!train::CheckCheckpointFile(path).ok()) return 0;
  auto loaded = fx.trainer->LoadCheckpoint(path);
  if (!loaded.ok()) return 0;
  // Round trip: what loaded saves, and that file loads.
  const std::string again = fx.dir + "/again.npz";
  const Status saved = fx.trainer->SaveCheckpoint(again, *loaded);
  if (!saved.ok()) {
    std::fprintf(stderr, "a loaded checkpoint does not save: %s\n", saved.ToString().c_str());
    std::abort();
  }
  auto reloaded = fx.trainer->LoadCheckpoint(again);
  if (!reloaded.ok()) {
    std::fprintf(stderr, "a saved checkpoint does not load: %s\n",
                 reloaded.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
