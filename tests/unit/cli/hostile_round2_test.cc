// Hostile input, round 2 (issue #27): the surfaces added after the first battery (data configs,
// --budget, signals, Q/DQ conversion, the runtime's allocations, deep nesting). Each test names
// the numbered item of the issue it pins ("Item12_..."), or the class of the "beyond the list"
// part it extends. Failing runs go through ExpectFails (hostile_fixture.h): a documented exit
// code, one escaped stderr line naming the file / node / option, bounded memory, no hang, and the
// output directory left as it was. Labelled `unit` (with the first battery) so `make asan` runs
// it under ASan/UBSan.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "cli/hostile_fixture.h"

namespace quantkit::testing {
namespace {

namespace fs = std::filesystem;

// An 8x8 gray JPEG (PIL, quality 50) and the offset of its SOF0 marker.
constexpr const char* kJpegHex =
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a181616183123251d283a33"
    "3d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c656763ffc0000b080008000801011100ffc400"
    "1f0000010501010101010100000000000000000102030405060708090a0bffc400b5100002010303020403050504040000017d01"
    "020300041105122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a343536"
    "3738393a434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a9293949596979899"
    "9aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5"
    "f6f7f8f9faffda0008010100003f002bffd9";
constexpr size_t kJpegSofOffset = 89;

// Peak RSS a refused run may take above quantkit's start-up (StartupRssKb): the model and the
// interpreter, never the gigabytes asked for (item 3: 10 GB of resamples; item 4: a 3 GB tensor).
constexpr long kRssAboveStartupKb = 256 * 1024;
// An 8x8 gray PNG (PIL); IHDR data at bytes [16, 29), its CRC at [29, 33).
constexpr const char* kPngHex =
    "89504e470d0a1a0a0000000d4948445200000008000000080800000000e164e1570000001049444154789c636c60800026068a"
    "1800260800905d30a51e0000000049454e44ae426082";

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

void PutBigEndian(std::string* bytes, size_t at, uint32_t value, int width) {
  for (int i = 0; i < width; ++i)
    (*bytes)[at + i] = static_cast<char>(value >> (8 * (width - 1 - i)));
}

uint32_t Crc32(const std::string& bytes) {  // PNG's CRC (ISO 3309), bitwise
  uint32_t crc = 0xffffffffu;
  for (const char c : bytes) {
    crc ^= static_cast<uint8_t>(c);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

// Whether `text` is well-formed UTF-8 (what docs/cli.md promises of every message).
bool IsUtf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<uint8_t>(text[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > text.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<uint8_t>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

bool HasStaging(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(".quantkit-staging-", 0) == 0) return true;
  }
  return false;
}

// ---------------------------------------------------------------- item 1: recursion
TEST_F(Hostile, Item1_DataConfigsThatIncludeThemselvesAreRefused) {
  const std::string out = File("out1");
  fs::create_directories(out);
  WriteAll(out + "/keep.txt", "user file");
  WriteAll(File("cfg_self.json"), R"({"data": "cfg_self.json"})");
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("cfg_self.json"), "-o", out, "-q"},
              {2}, {"cfg_self.json", "includes itself"}, out);
  WriteAll(File("cfg_a.json"), R"({"inputs": {"x": {"data": "cfg_b.json"}}})");
  WriteAll(File("cfg_b.json"), R"({"data": "cfg_a.json"})");
  ExpectFails({"eval", File("model.onnx"), "--data", File("cfg_a.json"), "-q"}, {2},
              {"cfg_a.json -> ", "cfg_b.json -> ", "includes itself"});
  // A long chain of distinct configs stops at the named limit.
  for (int i = 0; i < 40; ++i) {
    WriteAll(File("chain" + std::to_string(i) + ".json"),
             R"({"data": "chain)" + std::to_string(i + 1) + R"(.json"})");
  }
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("chain0.json"), "-o", out, "-q"},
              {2}, {"nested more than 16 deep", "kMaxDataConfigNesting"}, out);
  // The end of a legal chain still works: 3 configs then the data.
  WriteAll(File("c1.json"), R"({"data": "c2.json"})");
  WriteAll(File("c2.json"), R"({"data": "x.npy"})");
  const RunResult ok = Run({"eval", File("model.onnx"), "--data", File("c1.json"), "-q"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// ---------------------------------------------------------------- item 3: resamples
TEST_F(Hostile, Item3_DiagnoseBootstrapIsBoundedBeforeAnyWork) {
  const RunResult r = ExpectFails({"diagnose", File("model.onnx"), "--data", File("x.npy"),
                                   "--bootstrap", "1000000000", "-o", File("diag"), "-q"},
                                  {2}, {"--bootstrap", "out of range", "100000"});
  EXPECT_FALSE(fs::exists(File("diag")));
  EXPECT_LT(r.max_rss_kb, StartupRssKb(dir_) + kRssAboveStartupKb);
}

// ---------------------------------------------------------------- item 4: allocation budget
// A 700-byte model whose ConstantOfShape asks for 750 M floats (3 GB).
constexpr const char* kGiantConstantOfShape = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[N,1,4,4] x) => (float[750000000] y)
  <int64[1] shape = {750000000}>
  {
    c = ConstantOfShape(shape)
    m = ReduceMax <keepdims = 0> (x)
    y = Add(c, m)
  })";

TEST_F(Hostile, Item4_ATinyModelCannotAllocateGigabytes) {
  const std::string bytes = ParseModelBytes(kGiantConstantOfShape);
  ASSERT_LT(bytes.size(), 1000u);
  WriteAll(File("cos.onnx"), bytes);
  const std::string out = File("out4");
  fs::create_directories(out);
  WriteAll(out + "/keep.txt", "user file");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", File("cos.onnx"), "--input", "x=" + File("x.npy"), "-o",
                                 out},
        std::vector<std::string>{"calibrate", File("cos.onnx"), "--data", File("x.npy"), "-o", out,
                                 "-q"},
        std::vector<std::string>{"eval", File("cos.onnx"), "--data", File("x.npy"), "-q"}}) {
    const RunResult r = ExpectFails(
        args, {5}, {"ConstantOfShape", "exceeds the per-tensor budget", "--max-tensor-mb"}, out);
    EXPECT_LT(r.max_rss_kb, StartupRssKb(dir_) + kRssAboveStartupKb)
        << "the budget must act before the allocation";
  }
  // lint runs the float model once on zeros when every input shape is declared.
  std::string fixed = kGiantConstantOfShape;
  fixed.replace(fixed.find("float[N,1,4,4]"), 14, "float[1,1,4,4]");
  WriteAll(File("cos_fixed.onnx"), ParseModelBytes(fixed.c_str()));
  const RunResult lint =
      ExpectFails({"lint", File("cos_fixed.onnx")}, {5}, {"cos_fixed.onnx", "ConstantOfShape"});
  EXPECT_LT(lint.max_rss_kb, StartupRssKb(dir_) + kRssAboveStartupKb);
}

TEST_F(Hostile, Item4_TheBudgetIsAnOptionAndAnEnvironmentVariable) {
  // 300 k floats (1.2 MB) from ConstantOfShape: inside the default budget, above a 1 MiB limit;
  // the output is [batch, 300000] (eval reads a [batch, ...] output), 9.6 MB for the 8 samples.
  WriteAll(File("cos8.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N,1,4,4] x) => (float[N,300000] y)
    <int64[2] shape = {1,300000}, int64[1] one = {1}>
    { c = ConstantOfShape(shape)  m = ReduceMax <axes = [1,2,3], keepdims = 0> (x)  u = Unsqueeze(m, one)
      y = Add(c, u) })"));
  const std::vector<std::string> eval{"eval", File("cos8.onnx"), "--data", File("x.npy"), "-q"};
  RunResult r = Run(eval);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> low = eval;
  low.insert(low.begin(), {"--max-tensor-mb", "1"});
  ExpectFails(low, {5}, {"ConstantOfShape", "1.0 MiB"});
  std::vector<std::string> high = eval;
  high.insert(high.end(), {"--max-tensor-mb", "16"});  // after the subcommand too, as --threads
  r = Run(high);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ::setenv("QUANTKIT_MAX_TENSOR_MB", "1", 1);
  const RunResult env = Run(eval);
  ::setenv("QUANTKIT_MAX_TENSOR_MB", "nonsense", 1);
  const RunResult bad_env = Run(eval);
  ::unsetenv("QUANTKIT_MAX_TENSOR_MB");
  ExpectCleanFailure(env, {5}, {"ConstantOfShape"}, "QUANTKIT_MAX_TENSOR_MB=1");
  ExpectCleanFailure(bad_env, {2}, {"QUANTKIT_MAX_TENSOR_MB", "nonsense"},
                     "QUANTKIT_MAX_TENSOR_MB=nonsense");
  for (const char* v : {"0", "-1", "nan", "1e12"}) {
    ExpectFails({"--max-tensor-mb", v, "inspect", File("model.onnx")}, {2}, {"--max-tensor-mb"});
  }
}

// ---------------------------------------------------------------- item 7: symlink loops
TEST_F(Hostile, Item7_SymbolicLinkLoopsInDataDirectoriesAreNamed) {
  const std::string jpeg = FromHex(kJpegHex);
  // Flat image folder with a link to itself.
  fs::create_directories(File("imgs"));
  WriteAll(File("imgs/a.jpg"), jpeg);
  fs::create_symlink("self.jpg", File("imgs/self.jpg"));
  ExpectFails({"eval", File("model.onnx"), "--data", File("imgs"), "--resize", "4", "-q"}, {2},
              {"self.jpg", "symbolic link loop"});
  // ImageFolder classes with a link back to an ancestor (a cycle, not ELOOP).
  fs::create_directories(File("classes/cat/deeper"));
  WriteAll(File("classes/cat/a.jpg"), jpeg);
  fs::create_directory_symlink("../..", File("classes/cat/deeper/up"));
  ExpectFails({"eval", File("model.onnx"), "--data", File("classes"), "--resize", "4", "-q"}, {2},
              {"symbolic link loop"});
  // A .npy directory with a self-link.
  fs::create_directories(File("npys"));
  WriteAll(File("npys/s0.npy"), NpyBytes({1, 4, 4}, std::vector<double>(16, 0.5)));
  fs::create_symlink("loop.npy", File("npys/loop.npy"));
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("npys"), "-o", File("o7"), "-q"},
              {2}, {"loop.npy", "symbolic link loop"});
  EXPECT_FALSE(fs::exists(File("o7")));
  // Deep but finite nesting past the limit.
  std::string deep = File("deep/c");
  for (int i = 0; i < 70; ++i) deep += "/d";
  fs::create_directories(deep);
  WriteAll(deep + "/a.jpg", jpeg);
  ExpectFails({"eval", File("model.onnx"), "--data", File("deep"), "--resize", "4", "-q"}, {2},
              {"deeper than 64 levels"});
}

// ---------------------------------------------------------------- item 9: --budget inputs
TEST_F(Hostile, Item9_BudgetChecksTheHoldoutBeforeWritingAnything) {
  const std::string out = File("out9");
  fs::create_directories(out);
  WriteAll(out + "/calib.cache", "TRT-8601-EntropyCalibration2\nold: 3c010a14\n");
  WriteAll(File("wrong_shape.npy"), NpyBytes({4, 1, 5, 5}, std::vector<double>(100, 0.5)));
  WriteAll(File("empty.npy"), NpyBytes({0, 1, 4, 4}, {}));
  for (const char* holdout : {"missing.npy", "wrong_shape.npy", "empty.npy"}) {
    ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), "--budget", "0.05",
                 "--holdout", File(holdout), "-o", out, "-q"},
                {2}, {holdout}, out);
  }
  // Into a new directory: nothing is left behind either.
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), "--budget", "0.05",
               "--holdout", File("missing.npy"), "-o", File("new9"), "-q"},
              {2}, {"missing.npy"});
  EXPECT_FALSE(fs::exists(File("new9")));
  // With good held-out data the whole set lands at once, no staging left.
  const RunResult ok = Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "--budget",
                            "0.05", "--holdout", File("x.npy"), "-o", out, "-q"});
  ASSERT_TRUE(ok.exit_code == 0 || ok.exit_code == 1) << ok.err;
  for (const char* f : {"model.qdq.onnx", "calib.cache", "ranges.txt", "plan.json", "summary.txt",
                        "layer_precisions.txt", "fallback.json"}) {
    EXPECT_TRUE(fs::is_regular_file(out + "/" + f)) << f;
  }
  EXPECT_EQ(ReadAll(out + "/calib.cache").find("old:"), std::string::npos);
  EXPECT_FALSE(HasStaging(out));
}

// ---------------------------------------------------------------- item 10: signals
// A calibration that runs for seconds: the conv model one sample per run over many samples.
class HostileSignals : public Hostile {
 protected:
  void SetUp() override {
    Hostile::SetUp();
    std::vector<double> values(kSamples * 16);
    for (size_t i = 0; i < values.size(); ++i) values[i] = (i % 13) * 0.1 - 0.6;
    WriteAll(File("many.npy"), NpyBytes({kSamples, 1, 4, 4}, values));
  }
  std::vector<std::string> SlowCalibrate(const std::string& out) const {
    return {"calibrate",
            File("model.onnx"),
            "--data",
            File("many.npy"),
            "--run-batch",
            "1",
            "--batch-size",
            "1",
            "--method",
            "entropy",
            "-o",
            out,
            "-q"};
  }
  // Starts the slow run, waits until its staging directory exists (the long pass has begun), lets
  // it work a little, then sends `sig`.
  RunResult InterruptMidRun(const std::string& out, int sig) const {
    const pid_t pid = SpawnQuantkit(SlowCalibrate(out), dir_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!HasStaging(out) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(HasStaging(out)) << "the run never started its pass";
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(pid, sig);
    return WaitQuantkit(pid, dir_);
  }
  static constexpr int64_t kSamples = 200000;
};

TEST_F(HostileSignals, Item10_SigintAndSigtermRemoveTheStagingDirectory) {
  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(strsignal(sig));
    const std::string out = File("out_sig" + std::to_string(sig));
    fs::create_directories(out);
    WriteAll(out + "/calib.cache", "TRT-8601-EntropyCalibration2\nold: 3c010a14\n");
    const auto before = Snapshot(out);
    const RunResult r = InterruptMidRun(out, sig);
    EXPECT_EQ(r.signal, sig) << "exit " << r.exit_code << " (the run finished before the signal?)\n"
                             << r.err;
    EXPECT_FALSE(HasStaging(out));
    EXPECT_EQ(Snapshot(out), before);
  }
  // A directory the interrupted run created is removed too.
  const RunResult fresh = InterruptMidRun(File("created_by_run"), SIGINT);
  EXPECT_EQ(fresh.signal, SIGINT);
  EXPECT_FALSE(fs::exists(File("created_by_run")));
}

TEST_F(HostileSignals, Item10_ALaterRunRemovesStagingLeftByAKilledRun) {
  const std::string out = File("out_kill");
  fs::create_directories(out);
  const RunResult killed = InterruptMidRun(out, SIGKILL);  // what `timeout -s KILL` does
  EXPECT_EQ(killed.signal, SIGKILL);
  ASSERT_TRUE(HasStaging(out)) << "SIGKILL cannot be caught: the staging directory stays";
  const RunResult next =
      Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", out, "-q"});
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_FALSE(HasStaging(out)) << "the next run holds the lock: the dead run's staging is stale";
  EXPECT_TRUE(fs::is_regular_file(out + "/calib.cache"));
}

// ---------------------------------------------------------------- item 12: unusable scales
TEST_F(Hostile, Item12_ConvertRefusesScalesNoRuntimeCanUse) {
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N,1,4,4] x) => (float[N,1,4,4] y)
    <float s = {0.1}, int8 z = {0}>
    { q = QuantizeLinear(x, s, z)  y = DequantizeLinear(q, s, z) })")));
  const float kValues[] = {std::nanf(""), 0.0f, -0.5f, std::numeric_limits<float>::infinity()};
  for (const float v : kValues) {
    SCOPED_TRACE(v);
    ::onnx::ModelProto bad = m;
    for (auto& init : *bad.mutable_graph()->mutable_initializer()) {
      if (init.name() == "s") init.set_float_data(0, v);
    }
    WriteAll(File("badscale.onnx"), bad.SerializeAsString());
    ExpectFails({"convert", File("badscale.onnx"), File("out12.cache")}, {2},
                {"badscale.onnx", "scale 's'", "finite and positive"});
    EXPECT_FALSE(fs::exists(File("out12.cache")));
    // lint agrees: exit 2 with its report on stdout (rule QK003), not a message.
    const RunResult lint = Run({"lint", File("badscale.onnx")});
    EXPECT_EQ(lint.exit_code, 2) << lint.out << lint.err;
    EXPECT_NE(lint.out.find("QK003"), std::string::npos) << lint.out;
  }
  // Ranges text: NaN and negative amax are a broken file; only-zero ranges give nothing to write.
  WriteAll(File("nan.txt"), "x:nan\n");
  ExpectFails({"convert", File("nan.txt"), File("r.cache")}, {2},
              {"nan.txt:1", "'x'", "not negative"});
  WriteAll(File("neg.txt"), "x:0.5\ny:-2\n");
  ExpectFails({"convert", File("neg.txt"), File("r.cache")}, {2}, {"neg.txt:2", "'y'"});
  WriteAll(File("zero.txt"), "x:0\n");
  ExpectFails({"convert", File("zero.txt"), File("r.cache")}, {2}, {"zero.txt", "no usable scale"});
  EXPECT_FALSE(fs::exists(File("r.cache")));
  // One zero among good ranges: converted, and the dropped tensor is named with its reason.
  WriteAll(File("mixed.txt"), "x:1.5\ny:0\n");
  const RunResult mixed = Run({"convert", File("mixed.txt"), File("r.cache")});
  EXPECT_EQ(mixed.exit_code, 0) << mixed.err;
  EXPECT_NE(mixed.out.find("warning: y: "), std::string::npos) << mixed.out;
}

// ---------------------------------------------------------------- items 13, 15: invalid Q/DQ
TEST_F(Hostile, Item13_TypeInvalidQdqIsAnErrorForLintAndConvert) {
  WriteAll(File("q_int8.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (int8[4] x) => (float[4] y) <float s = {0.1}, int8 z = {0}>
    { q = QuantizeLinear(x, s, z)  y = DequantizeLinear(q, s, z) })"));
  WriteAll(File("dq_float.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[4] y) <float s = {0.1}, int8 z = {0}>
    { y = DequantizeLinear(x, s, z) })"));
  for (const char* m : {"q_int8.onnx", "dq_float.onnx"}) {
    ExpectFails({"lint", File(m)}, {2}, {m, "'x' of type"});
    ExpectFails({"convert", File(m), File("o13.cache")}, {2}, {m, "'x' of type"});
    EXPECT_FALSE(fs::exists(File("o13.cache")));
  }
}

TEST_F(Hostile, Item15_ConvertSaysWhatIsWrongWithEachQdq) {
  struct Case {
    const char* name;
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"zp_float.onnx",
       "<float s = {0.1}, float z = {0}> { q = QuantizeLinear(x, s, z) y = DequantizeLinear(q, s) }",
       "zero point 'z' is float"},
      {"zp_int32.onnx",
       "<float s = {0.1}, int32 z = {0}> { q = QuantizeLinear(x, s, z) y = DequantizeLinear(q, s) }",
       "zero point 'z' is int32"},
      {"scale_int.onnx",
       "<int64 s = {1}, int8 z = {0}> { q = QuantizeLinear(x, s, z) y = DequantizeLinear(q, s, z) }",
       "scale 's' is int64"},
      {"scale_empty.onnx",
       "<float[0] s = {}, int8[0] z = {}> { q = QuantizeLinear(x, s, z) y = DequantizeLinear(q, s, z) }",
       "scale 's' is empty"},
      {"q_one_input.onnx", "<float s = {0.1}> { q = QuantizeLinear(x) y = DequantizeLinear(q, s) }",
       "needs the input x and a scale"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WriteAll(File(c.name),
             ParseModelBytes((std::string("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                                          "g (float[4] x) => (float[4] y) ") +
                              c.text)
                                 .c_str()));
    ExpectFails({"convert", File(c.name), File("o15.cache")}, {2}, {c.name, c.says});
  }
  // Valid Q/DQ that give no scale (an int32 bias DQ) say so instead of "no Q/DQ".
  WriteAll(File("bias_only.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[4] y) <int32[4] b = {1, 2, 3, 4}, float s = {0.1}>
    { d = DequantizeLinear(b, s)  y = Add(x, d) })"));
  ExpectFails({"convert", File("bias_only.onnx"), File("o15.cache")}, {2},
              {"bias_only.onnx", "int32 (bias)"});
  EXPECT_FALSE(fs::exists(File("o15.cache")));
}

// ---------------------------------------------------------------- item 14: numbers
TEST_F(Hostile, Item14_NegativeAndNanNumbersAreRefusedNamingTheOption) {
  const RunResult cal =
      Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", File("c14"), "-q"});
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  const std::string cache = File("c14/calib.cache"), plan = File("c14/plan.json");
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", File("o14"),
               "--samples", "-1"},
              {2}, {"--samples", "-1"});
  ExpectFails({"eval", File("model.onnx"), "--data", File("x.npy"), "--samples", "nan"}, {2},
              {"--samples", "nan"});
  ExpectFails(
      {"analyze", File("model.onnx"), "--plan", plan, "--data", File("x.npy"), "--top", "-1"}, {2},
      {"--top"});
  for (const char* rtol : {"nan", "-1", "inf"}) {
    ExpectFails({"cache", "diff", cache, cache, "--rtol", rtol}, {2}, {"--rtol", rtol});
  }
  ExpectFails({"tensor-calib", File("x.npy"), "--bins", "1e10"}, {2},
              {"--bins", "65536"});  // item 19
  ExpectFails({"eval", File("model.onnx"), "--data", File("x.npy"), "--scale", "0"}, {2},
              {"--scale"});
  EXPECT_FALSE(fs::exists(File("o14")));
}

// ---------------------------------------------------------------- item 16: too large images
TEST_F(Hostile, Item16_TooLargeImagesAreExit5WhateverTheFormat) {
  std::string jpeg = FromHex(kJpegHex);
  ASSERT_EQ(jpeg.substr(kJpegSofOffset, 2), "\xff\xc0");
  PutBigEndian(&jpeg, kJpegSofOffset + 5, 60000, 2);  // height
  PutBigEndian(&jpeg, kJpegSofOffset + 7, 60000, 2);  // width
  fs::create_directories(File("big_jpeg"));
  WriteAll(File("big_jpeg/a.jpg"), jpeg);
  ExpectFails({"eval", File("model.onnx"), "--data", File("big_jpeg"), "--resize", "4", "-q"}, {5},
              {"a.jpg", "60000x60000", "too large"});
  std::string png = FromHex(kPngHex);
  PutBigEndian(&png, 16, 60000, 4);
  PutBigEndian(&png, 20, 60000, 4);
  PutBigEndian(&png, 29, Crc32(png.substr(12, 17)), 4);
  fs::create_directories(File("big_png"));
  WriteAll(File("big_png/a.png"), png);
  ExpectFails({"eval", File("model.onnx"), "--data", File("big_png"), "--resize", "4", "-q"}, {5},
              {"a.png", "60000x60000", "too large"});
}

// ---------------------------------------------------------------- item 17: --stats target
TEST_F(Hostile, Item17_ADirectoryAtStatsIsRefusedBeforeThePass) {
  fs::create_directories(File("stats_dir"));
  // The data is missing too: an error about --stats shows the check comes before the data is read.
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("missing.npy"), "--stats",
               File("stats_dir"), "-q"},
              {2}, {"--stats", "stats_dir", "directory"});
  for (const char* option : {"--save-predictions", "--save-outputs"}) {
    ExpectFails({"eval", File("model.onnx"), "--data", File("missing.npy"), option,
                 File("stats_dir"), "-q"},
                {2}, {option, "stats_dir", "directory"});
  }
}

// ---------------------------------------------------------------- item 18: nesting
TEST_F(Hostile, Item18_DeeplyNestedSubgraphsNameTheNestingLimit) {
  // If -> then_branch -> If -> ... 1000 deep, each level a valid If with an else branch.
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  ::onnx::GraphProto* g = m.mutable_graph();
  g->set_name("main");
  for (int depth = 0; depth < 1000; ++depth) {
    ::onnx::NodeProto* node = g->add_node();
    node->set_op_type("If");
    node->add_input("cond");
    node->add_output("y" + std::to_string(depth));
    ::onnx::AttributeProto* els = node->add_attribute();
    els->set_name("else_branch");
    els->set_type(::onnx::AttributeProto::GRAPH);
    els->mutable_g()->set_name("else");
    ::onnx::AttributeProto* then = node->add_attribute();
    then->set_name("then_branch");
    then->set_type(::onnx::AttributeProto::GRAPH);
    g = then->mutable_g();
    g->set_name("then" + std::to_string(depth));
  }
  WriteAll(File("deep_if.onnx"), m.SerializeAsString());
  for (const char* cmd : {"inspect", "lint"}) {
    ExpectFails({cmd, File("deep_if.onnx")}, {3},
                {"deep_if.onnx", "1000 levels of subgraphs", "kMaxProtoRecursion"});
  }
  // Corrupt bytes are still "not a valid ONNX protobuf".
  WriteAll(File("corrupt.onnx"), std::string("\x3a\x80\x80\x80\x80\x10", 6));
  ExpectFails({"inspect", File("corrupt.onnx")}, {2}, {"not a valid ONNX protobuf"});
}

// ---------------------------------------------------------------- item 19: messages
TEST_F(Hostile, Item19_MessagesNameTheLimitTheFileAndTheInput) {
  ExpectFails({"eval", File("model.onnx"), "--data", File("x.npy"), "--resize", "100000"}, {2},
              {"resize '100000'", "larger than the limit of 65536"});
  fs::create_directories(File("imgs19"));
  WriteAll(File("imgs19/a.jpg"), FromHex(kJpegHex));
  WriteAll(File("mean.json"), R"({"images": "imgs19", "resize": 4, "mean": [0.5, 0.4]})");
  ExpectFails({"eval", File("model.onnx"), "--data", File("mean.json"), "-q"}, {2},
              {"mean.json", "inputs.x", "mean has 2 values", "1 channel"});
  WriteAll(File("std.json"), R"({"images": "imgs19", "resize": 4, "std": 0})");
  ExpectFails({"eval", File("model.onnx"), "--data", File("std.json"), "-q"}, {2},
              {"std.json", "inputs.x", "std 0", "nonzero"});
  WriteAll(File("resize.json"), R"({"images": "imgs19", "resize": 100000})");
  ExpectFails({"eval", File("model.onnx"), "--data", File("resize.json"), "-q"}, {2},
              {"resize.json", "inputs.x.resize", "larger than the limit"});
}

// ---------------------------------------------------------------- item 20: binary caches
TEST_F(Hostile, Item20_BinaryCachesAreEscapedInEveryMessage) {
  std::string binary = "TRT-";
  for (int i = 0; i < 200; ++i) binary += static_cast<char>(0x80 + (i * 37) % 128);
  binary += "\n\xff\xfe: 3c010a14\n";
  WriteAll(File("binary.cache"), binary);
  const std::string good = "TRT-8601-EntropyCalibration2\nc: 3c010a14\n";
  WriteAll(File("good.cache"), good);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"cache", "inspect", File("binary.cache")},
        std::vector<std::string>{"cache", "check", File("binary.cache"), "--model",
                                 File("model.onnx")},
        std::vector<std::string>{"cache", "diff", File("good.cache"), File("binary.cache")},
        std::vector<std::string>{"convert", File("binary.cache"), File("o20.txt")}}) {
    const RunResult r = ExpectFails(args, {2}, {"binary.cache", "\\x"});
    EXPECT_TRUE(IsUtf8(r.err)) << "raw non-UTF-8 bytes reached the terminal: " << r.err;
  }
}

// ---------------------------------------------------------------- QAT: items 2, 5, 6, 11, 14
class HostileQat : public Hostile {
 protected:
  void SetUp() override {
    Hostile::SetUp();
    const RunResult cal =
        Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", File("cal"), "-q"});
    ASSERT_EQ(cal.exit_code, 0) << cal.err;
  }
  // A short qat run from the calibrated plan (no calibration pass of its own).
  std::vector<std::string> Qat(const std::string& out, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"qat",
                                  File("model.onnx"),
                                  "--data",
                                  File("x.npy"),
                                  "--plan",
                                  File("cal/plan.json"),
                                  "-o",
                                  out,
                                  "--steps",
                                  "2",
                                  "--batch-size",
                                  "4",
                                  "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  static std::vector<std::string> Entries(const std::string& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

TEST_F(HostileQat, Item2_AFullDiskIsAnIoErrorAndLeavesNothingHalfWritten) {
  const std::string out = File("q2");
  fs::create_directories(out);
  WriteAll(out + "/plan.json", "old plan\n");
  const auto before = Snapshot(out);
  // RLIMIT_FSIZE makes every write past 1 KB fail (EFBIG) as a full disk does (ENOSPC): the
  // checkpoint is the first file qat writes.
  const RunResult r = RunQuantkit(Qat(out), dir_, kRunTimeoutSeconds, SpawnOptions{1024});
  ExpectCleanFailure(r, {4}, {"checkpoint.npz"}, "qat on a full disk");
  EXPECT_EQ(Snapshot(out), before)
      << "a failed qat leaves the directory as it was (no checkpoint.npz.tmp)";
  // Into a new directory: nothing at all.
  const RunResult fresh =
      RunQuantkit(Qat(File("q2_new")), dir_, kRunTimeoutSeconds, SpawnOptions{1024});
  ExpectCleanFailure(fresh, {4}, {"checkpoint.npz"}, "qat on a full disk, new directory");
  EXPECT_FALSE(fs::exists(File("q2_new")));
}

TEST_F(HostileQat, Item5_ABadResumeCheckpointIsBadInputNamingIt) {
  // A real checkpoint: a run paused after one step leaves only it (and no result set).
  const RunResult paused = Run(Qat(File("q5"), {"--stop-after", "1"}));
  ASSERT_EQ(paused.exit_code, 0) << paused.err;
  EXPECT_EQ(Entries(File("q5")), std::vector<std::string>{"checkpoint.npz"});
  const std::string good = ReadAll(File("q5/checkpoint.npz"));
  ASSERT_GT(good.size(), 100u);
  WriteAll(File("truncated.pt"), good.substr(0, good.size() / 2));
  WriteAll(File("garbage.pt"), std::string(4096, '\x5a'));
  WriteAll(File("empty.pt"), "");
  fs::create_directories(File("dir.pt"));
  for (const char* bad : {"missing.pt", "truncated.pt", "garbage.pt", "empty.pt", "dir.pt"}) {
    ExpectFails(Qat(File("q5_out"), {"--resume", File(bad)}), {2}, {bad});
    EXPECT_FALSE(fs::exists(File("q5_out"))) << bad;
  }
  // Another model's checkpoint: named, with what does not match.
  WriteAll(File("wide.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    net (float[N,1,4,4] x) => (float[N,3,4,4] y)
    <float[3,1,3,3] W = {1,0,-1,2,0,-2,1,0,-1, 0,1,0,1,-4,1,0,1,0, 0,0,0,0,1,0,0,0,0}>
    { c = Conv <pads = [1,1,1,1], kernel_shape = [3,3]> (x, W)  y = Relu(c) })"));
  std::vector<std::string> other = Qat(File("q5_other"), {"--resume", File("q5/checkpoint.npz")});
  other[1] = File("wide.onnx");
  other.erase(other.begin() + 4,
              other.begin() + 6);  // no plan for it: drop --plan, calibrate first
  ExpectFails(other, {2}, {"checkpoint.npz", "another model"});
  // The good checkpoint resumes.
  const RunResult resumed = Run(Qat(File("q5"), {"--resume", File("q5/checkpoint.npz")}));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(fs::is_regular_file(File("q5/model.qdq.onnx")));
  EXPECT_FALSE(HasStaging(File("q5")));
}

TEST_F(HostileQat, Item6_And14_QatNumbersAreRangeChecked) {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"--weight-decay", "nan"}, {"--warmup", "-5"},         {"--temperature", "0"},
      {"--lr", "inf"},           {"--feature-weight", "-1"}, {"--steps", "1e12"},
      {"--holdout", "-1"},       {"--metric", "bogus"},      {"--lr", "0"},
      {"--lr", "automatic"}};
  for (const auto& [option, value] : bad) {
    ExpectFails(Qat(File("q6"), {option, value}), {2}, {option});
    EXPECT_FALSE(fs::exists(File("q6")));
  }
}

TEST_F(HostileQat, Item11_APlanForAnotherModelIsRefused) {
  WriteAll(File("other.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    other (float[N,1,4,4] a) => (float[N,2,4,4] b)
    <float[2,1,3,3] K = {1,0,-1,2,0,-2,1,0,-1, 0,1,0,1,-4,1,0,1,0}>
    { t = Conv <pads = [1,1,1,1], kernel_shape = [3,3]> (a, K)  b = Relu(t) })"));
  WriteAll(File("a.npy"), ReadAll(File("x.npy")));
  std::vector<std::string> args = Qat(File("q11"));
  args[1] = File("other.onnx");
  args[3] = "a=" + File("a.npy");
  ExpectFails(args, {2}, {"plan.json", "another model"});
  EXPECT_FALSE(fs::exists(File("q11")));
  // eval refuses the same plan the same way.
  ExpectFails({"eval", File("other.onnx"), "--plan", File("cal/plan.json"), "--data",
               "a=" + File("a.npy"), "-q"},
              {2}, {"another model"});
}

}  // namespace
}  // namespace quantkit::testing
