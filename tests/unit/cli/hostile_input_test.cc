// Hostile input and everyday misuse (issue #13), through the real binary: each case says which
// numbered item of the issue it pins. Every failing run is checked by ExpectCleanFailure (exit
// code in the set of docs/cli.md, never 70 or a signal, one stderr line naming the file / node /
// tensor, no raw escape characters, peak RSS < 1 GB, no hang) and output directories are
// compared before and after. Labelled `unit` so that `make asan` runs it under ASan/UBSan.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/hostile_fixture.h"
#include "testing/onnx_builders.h"

namespace quantkit::testing {
namespace {

// ---------------------------------------------------------------- item 1: crash
TEST_F(Hostile, Item1_EvalModelWithoutOutputsIsAnError) {
  WriteAll(File("no_out.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N,1,4,4] x) => () { y = Relu(x) })"));
  ExpectFails({"eval", File("no_out.onnx"), "--data", File("x.npy")}, {2},
              {"no_out.onnx", "no graph outputs"});
  ExpectFails(
      {"eval", File("model.onnx"), "--reference", File("no_out.onnx"), "--data", File("x.npy")},
      {2}, {"no_out.onnx", "no graph outputs"});
}

// ---------------------------------------------------------------- item 2: hangs
TEST_F(Hostile, Item2_SpecialFilesAreRefusedWithoutOpening) {
  ASSERT_EQ(mkfifo(File("fifo.onnx").c_str(), 0644), 0);
  for (const char* cmd : {"inspect", "lint"}) {
    ExpectFails({cmd, File("fifo.onnx")}, {2}, {"fifo.onnx", "FIFO"});
  }
  ExpectFails({"eval", File("model.onnx"), "--data", File("fifo.onnx")}, {2}, {"fifo.onnx"});
  ExpectFails({"inspect", dir_}, {2}, {"directory"});
  ExpectFails({"inspect", "/dev/zero"}, {2}, {"/dev/zero", "character device"});
  // External data whose location is a FIFO.
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[4] y) { y = Add(x, w) })")));
  testing::AddExternalFloatInitializer(m.mutable_graph(), "w", 4, "w.fifo");
  ASSERT_EQ(mkfifo(File("w.fifo").c_str(), 0644), 0);
  WriteAll(File("ext.onnx"), m.SerializeAsString());
  ExpectFails({"inspect", File("ext.onnx")}, {2}, {"w.fifo", "FIFO"});
}

// ---------------------------------------------------------------- item 3: gigabytes
TEST_F(Hostile, Item3_DeclaredSizeWithoutDataIsCheckedBeforeAllocating) {
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[4] y) { y = Add(x, big) })")));
  auto* big = m.mutable_graph()->add_initializer();
  big->set_name("big");
  big->set_data_type(::onnx::TensorProto::FLOAT);
  big->add_dims(30000);
  big->add_dims(30000);
  const std::string bytes = m.SerializeAsString();
  ASSERT_LT(bytes.size(), 200u);
  WriteAll(File("big.onnx"), bytes);
  ExpectFails({"inspect", File("big.onnx")}, {2}, {"big.onnx", "big", "900000000"});
  // The same as a Constant node's tensor attribute.
  ::onnx::ModelProto c;
  ASSERT_TRUE(c.ParseFromString(ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[4] y) { c = Constant <value = float[1] {0}> () y = Add(x, c) })")));
  ::onnx::TensorProto* t = c.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_t();
  t->clear_float_data();
  t->clear_dims();
  t->add_dims(30000);
  t->add_dims(30000);
  WriteAll(File("big_const.onnx"), c.SerializeAsString());
  ExpectFails({"lint", File("big_const.onnx")}, {2}, {"big_const.onnx", "900000000"});
}

TEST_F(Hostile, Item3_ConvertDoesNotFoldAGiantConstantOfShape) {
  // A Q/DQ model (convert strips it) with a ConstantOfShape of 10^9 elements: folding it used to
  // allocate 4 GB; now large constants stay nodes, and the output imports again.
  WriteAll(File("qdq_cos.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1000] x) => (float[1000,1000,1000] y)
    <int64[3] shape = {1000, 1000, 1000}, float s = {0.1}, int8 z = {0}>
    {
      q = QuantizeLinear(x, s, z)
      d = DequantizeLinear(q, s, z)
      c = ConstantOfShape(shape)
      y = Add(d, c)
    })"));
  const RunResult r = Run({"convert", File("qdq_cos.onnx"), File("float.onnx")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.max_rss_kb, kMaxRssKb);
  const RunResult again = Run({"inspect", File("float.onnx")});
  EXPECT_EQ(again.exit_code, 0) << "convert wrote a model quantkit rejects: " << again.err;
  // Item 8: dims whose product wraps 2^64 (each under the old per-dim limit of 2^20).
  WriteAll(File("qdq_wrap.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[4] y)
    <int64[4] shape = {1048576, 1048576, 1048576, 1048576}, float s = {0.1}, int8 z = {0}>
    {
      q = QuantizeLinear(x, s, z)
      d = DequantizeLinear(q, s, z)
      c = ConstantOfShape(shape)
      n = Shape(c)
      y = Identity(d)
    })"));
  const RunResult wrap = Run({"convert", File("qdq_wrap.onnx"), File("wrap.onnx")});
  if (wrap.exit_code == 0) {
    const RunResult back = Run({"inspect", File("wrap.onnx")});
    EXPECT_EQ(back.exit_code, 0) << "convert wrote a model quantkit rejects: " << back.err;
  } else {
    ExpectCleanFailure(wrap, {2, 3}, {"qdq_wrap.onnx"}, "convert qdq_wrap.onnx");
    EXPECT_FALSE(std::filesystem::exists(File("wrap.onnx")));
  }
}

TEST_F(Hostile, Item3_ThreadsAreCappedAtTheCpuCount) {
  const RunResult r = Run({"--threads", "100000", "inspect", File("model.onnx")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("exceeds the"), std::string::npos) << r.err;
  EXPECT_LT(r.max_rss_kb, kMaxRssKb);
  ExpectFails({"--threads", "-3", "inspect", File("model.onnx")}, {2}, {"--threads"});
}

// ---------------------------------------------------------------- item 4: exit 70 for bad input
TEST_F(Hostile, Item4_PlanVersionOfTheWrongTypeIsBadInput) {
  WriteAll(File("plan.json"), R"({"format": "quantkit.plan", "version": "1", "tensors": {}})");
  ExpectFails({"eval", File("model.onnx"), "--plan", File("plan.json"), "--data", File("x.npy")},
              {2}, {"plan.json", "version", "expected an integer, got string"});
}

TEST_F(Hostile, Item4_ImpossibleReshapeNamesTheNode) {
  WriteAll(File("reshape.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N,1,4,4] x) => (float[N,7] y) <int64[2] shape = {-1, 7}> { y = Reshape(x, shape) })"));
  for (const char* cmd : {"eval", "calibrate"}) {
    std::vector<std::string> args{cmd, File("reshape.onnx"), "--data", File("x.npy")};
    if (std::string(cmd) == "calibrate") args.insert(args.end(), {"-o", File("out_reshape")});
    ExpectFails(args, {2}, {"Reshape"});
  }
}

// ---------------------------------------------------------------- item 5: mixed outputs
TEST_F(Hostile, Item5_NonFileTargetFailsBeforeAnythingIsReplaced) {
  const std::string out = File("out");
  std::filesystem::create_directories(out + "/plan.json");
  WriteAll(out + "/calib.cache", "TRT-8601-EntropyCalibration2\nold: 3c010a14\n");
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", out, "-q"}, {2},
              {"plan.json"}, out);
}

TEST_F(Hostile, Item5_ALockedOutputDirectoryIsRefusedNotMixed) {
  const std::string out = File("out");
  std::filesystem::create_directories(out);
  WriteAll(out + "/calib.cache", "TRT-8601-EntropyCalibration2\nold: 3c010a14\n");
  // Another run holds the directory (what a concurrent calibrate does).
  const int fd = ::open(out.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", out, "-q"}, {4},
              {out, "another quantkit run"}, out);
  ::close(fd);
  // Unlocked, the whole set appears at once and no staging directory is left behind.
  const RunResult r =
      Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", out, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    EXPECT_EQ(e.path().filename().string().rfind(".quantkit-staging", 0), std::string::npos);
    ++entries;
  }
  EXPECT_EQ(entries, 5u);
  EXPECT_EQ(ReadAll(out + "/calib.cache").find("old:"), std::string::npos);
}

// diagnose locks -o before its long work: with bad --data the second run still fails on the
// lock, which shows that the lock comes first (a concurrent run fails at once, not after minutes
// of analysis). calibrate and fallback (rank 0 locks when it writes) and data are refused too.
// Nothing in the directory changes.
TEST_F(Hostile, Item5_EveryWriterLocksItsOutputDirectoryFirst) {
  const RunResult plan =
      Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", File("cal"), "-q"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const std::string out = File("out");
  std::filesystem::create_directories(out);
  WriteAll(out + "/report.txt", "old\n");
  const int fd = ::open(out.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const std::string missing = File("missing.npy");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"diagnose", File("model.onnx"), "--data", missing, "-o", out,
                                 "-q"},
        // Missing data: the lock error (not the data's) shows the lock is taken before the pass.
        std::vector<std::string>{"calibrate", File("model.onnx"), "--data", missing, "-o", out,
                                 "-q"},
        std::vector<std::string>{"fallback", File("model.onnx"), "--plan", File("cal/plan.json"),
                                 "--data", File("x.npy"), "-o", out, "-q"},
        std::vector<std::string>{"data", File("model.onnx"), "--data", File("x.npy"), "-o", out}}) {
    ExpectFails(args, {4}, {out, "another quantkit run"}, out);
  }
  ::close(fd);
}

TEST_F(Hostile, Item5_DiagnoseAndDataWriteOneSetOrNothing) {
  // A directory where a report goes: refused before the analysis, the old files kept.
  const std::string out = File("diag");
  std::filesystem::create_directories(out + "/report.json");
  WriteAll(out + "/report.txt", "old\n");
  ExpectFails({"diagnose", File("model.onnx"), "--data", File("x.npy"), "-o", out, "-q"}, {2},
              {"report.json"}, out);
  // A run that fails after taking the lock leaves no new directory behind.
  ExpectFails(
      {"diagnose", File("model.onnx"), "--data", File("missing.npy"), "-o", File("new_dir"), "-q"},
      {2, 4}, {"missing.npy"});
  EXPECT_FALSE(std::filesystem::exists(File("new_dir")));
  std::filesystem::remove(out + "/report.json");
  const RunResult d =
      Run({"diagnose", File("model.onnx"), "--data", File("x.npy"), "-o", out, "-q"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(ReadAll(out + "/report.txt"), "old\n");
  EXPECT_TRUE(std::filesystem::is_regular_file(out + "/report.json"));
  EXPECT_TRUE(std::filesystem::is_regular_file(out + "/convergence.svg"));
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    EXPECT_EQ(e.path().filename().string().rfind(".quantkit-staging", 0), std::string::npos);
  }
  // `quantkit data`: the same rule for the .npy it writes; a new directory is not left behind.
  const std::string samples = File("samples");
  std::filesystem::create_directories(samples + "/x.npy");
  ExpectFails({"data", File("model.onnx"), "--data", File("x.npy"), "-o", samples}, {2}, {"x.npy"},
              samples);
  std::filesystem::remove(samples + "/x.npy");
  const RunResult ok =
      Run({"data", File("model.onnx"), "--data", File("x.npy"), "-o", samples, "--samples", "3"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ReadAll(samples + "/x.npy").substr(0, 6), "\x93NUMPY");
}

// ---------------------------------------------------------------- item 6: silent no-ops
TEST_F(Hostile, Item6_NamesThatMatchNothingAreErrorsWithCloseMatches) {
  const std::string out = File("out6");
  ExpectFails(
      {"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", out, "--exclude", "Rellu"},
      {2}, {"Rellu", "did you mean", "Relu"});
  EXPECT_FALSE(std::filesystem::exists(out + "/plan.json"));
  // No close match: the message lists what the model has instead of nothing.
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", out, "--exclude",
               "zzzzzzzz"},
              {2}, {"zzzzzzzz", "no names", "'Conv', 'Relu'"});
  ::onnx::ModelProto named;
  ASSERT_TRUE(named.ParseFromString(ParseModelBytes(kConvModel)));
  named.mutable_graph()->mutable_node(0)->set_name("first_conv");
  named.mutable_graph()->mutable_node(1)->set_name("last_relu");
  WriteAll(File("named.onnx"), named.SerializeAsString());
  ExpectFails({"calibrate", File("named.onnx"), "--data", File("x.npy"), "-o", out, "--exclude",
               "zzzzzzzz"},
              {2}, {"zzzzzzzz", "2 named nodes ('first_conv', 'last_relu')", "'Conv', 'Relu'"});
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", out, "--override",
               "nosuchtensor=max"},
              {2}, {"nosuchtensor", "no close match among", "'x'", "'Conv'"});
  ExpectFails({"run", File("model.onnx"), "--input", "x=" + File("x.npy"), "-o", File("run_out"),
               "--dump", "zzzzzz"},
              {2}, {"'zzzzzz'", "no close match among the 3 tensors of the model: 'x', 'c', 'y'"});
  ExpectFails({"run", File("model.onnx"), "--input", "x=" + File("x.npy"), "-o", File("run_out"),
               "--dump", "cc"},
              {2}, {"'cc'", "did you mean", "'c'"});
  WriteAll(
      File("float_nodes.json"),
      R"({"format": "quantkit.plan", "version": 1, "float_nodes": {"NoSuchConv": "x"}, "tensors": {}})");
  ExpectFails(
      {"eval", File("model.onnx"), "--plan", File("float_nodes.json"), "--data", File("x.npy")},
      {2}, {"NoSuchConv"});
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x.npy")}, {2}, {"-o"});
  for (const char* n : {"0", "-8"}) {
    ExpectFails(
        {"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", out, "--run-batch", n},
        {2}, {"--run-batch", "out of range", "[1,65536]"}, out);
  }
  ExpectFails({"nosuchcmd", "--help"}, {2}, {"nosuchcmd", "subcommands: '"});
  ExpectFails({"quantise", "--help"}, {2}, {"unknown subcommand 'quantise'"});
  ExpectFails({"calibrat", File("model.onnx")}, {2}, {"did you mean 'calibrate'"});
  ExpectFails({"inspect", File("model.onnx"), "--no-such-option"}, {2}, {"--no-such-option"});
}

// ---------------------------------------------------------------- item 7: raw terminal text
TEST_F(Hostile, Item7_ControlCharactersInNamesAreEscaped) {
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[4] y) { y = Relu(x) })")));
  m.mutable_graph()->mutable_node(0)->set_op_type("Evil\x1b[2J\nquantkit: forged line");
  WriteAll(File("evil.onnx"), m.SerializeAsString());
  WriteAll(File("x4.npy"), NpyBytes({4}, {1, 2, 3, 4}));
  const RunResult r =
      ExpectFails({"run", File("evil.onnx"), "--input", "x=" + File("x4.npy"), "-o", File("o7")},
                  {3}, {"\\x1b[2J\\nquantkit: forged line"});
  // Cache listings: a tensor name with an escape sequence.
  WriteAll(File("evil.cache"), "TRT-8601-EntropyCalibration2\nt\x1b]0;pwned\x07: 3c010a14\n");
  const RunResult c = Run({"cache", "inspect", File("evil.cache")});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.out.find('\x1b'), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("t\\x1b]0;pwned\\x07"), std::string::npos) << c.out;
}

// ---------------------------------------------------------------- item 8: caches and plans
TEST_F(Hostile, Item8_CacheScalesThatTensorRtCannotUseAreFlagged) {
  // 0x00000001 = 1.4e-45 (denormal), 0x7fc00000 NaN, 0x7f800000 Inf, 0xbf800000 -1, 0 zero.
  WriteAll(
      File("bad.cache"),
      "TRT-8601-EntropyCalibration2\ndn: 00000001\nnan: 7fc00000\ninf: 7f800000\nneg: bf800000\nzero: 0\nok: "
      "3c010a14\n");
  const RunResult r = Run({"cache", "inspect", File("bad.cache")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  for (const char* p : {"denormal", "NaN", "infinite", "negative", "zero"}) {
    EXPECT_NE(r.out.find(std::string("<- ") + p), std::string::npos) << p << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("5 of 6 scales"), std::string::npos) << r.out;
  const RunResult check = Run({"cache", "check", File("bad.cache"), "--model", File("model.onnx")});
  EXPECT_EQ(check.exit_code, 1);
  EXPECT_NE(check.out.find("error: dn: scale"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("is denormal"), std::string::npos) << check.out;
  // A denormal scale is never written into a converted cache.
  const RunResult conv = Run({"convert", File("bad.cache"), File("copy.cache")});
  EXPECT_EQ(conv.exit_code, 0) << conv.err;
  EXPECT_EQ(ReadAll(File("copy.cache")).find("00000001"), std::string::npos);
}

TEST_F(Hostile, Item8_DuplicateCacheLinesAreAnError) {
  WriteAll(File("dup.cache"),
           "TRT-8601-EntropyCalibration2\nx: 3c010a14\ny: 3c010a14\nx: 3d010a14\n");
  ExpectFails({"cache", "inspect", File("dup.cache")}, {2}, {"dup.cache:4", "'x'", "line 2"});
}

TEST_F(Hostile, Item8_PlanErrorsNameTheKeyPathAndType) {
  WriteAll(
      File("p1.json"),
      R"({"format": "quantkit.plan", "version": 1, "tensors": {"c": {"scale": [0.1, "big"], "amax": [1, 2]}}})");
  ExpectFails({"convert", File("p1.json"), File("p1.cache")}, {2},
              {"p1.json", "tensors.c.scale[1]", "expected a number, got string"});
  WriteAll(
      File("p2.json"),
      R"({"format": "quantkit.plan", "version": 1, "tensors": {"c": {"scale": [0.1], "amax": [12.7], "zero_point": [3]}}})");
  ExpectFails({"convert", File("p2.json"), File("p2.cache")}, {3},
              {"tensors.c.zero_point[0]", "not 0"});
  EXPECT_FALSE(std::filesystem::exists(File("p2.cache")));
  WriteAll(
      File("p3.json"),
      R"({"format": "quantkit.plan", "version": 1, "tensors": {"c": {"scale": [0.1], "amax": [12.7], "zero_point": [0], "dtype": "uint8"}}})");
  ExpectFails({"convert", File("p3.json"), File("p3.cache")}, {3}, {"tensors.c.dtype", "uint8"});
}

TEST_F(Hostile, Item8_OpsetsAboveTheSupportedRangeAreRefused) {
  WriteAll(File("op99.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 99]>
    g (float[4] x) => (float[4] y) { y = Relu(x) })"));
  ExpectFails({"inspect", File("op99.onnx")}, {3}, {"op99.onnx", "opset 99", "1..21"});
  ExpectFails({"convert", File("op99.onnx"), File("op99_out.onnx")}, {3}, {"opset 99"});
  EXPECT_FALSE(std::filesystem::exists(File("op99_out.onnx")));
}

// ---------------------------------------------------------------- item 9: dtypes
TEST_F(Hostile, Item9_MismatchedDtypeIsRefusedByEveryCommand) {
  std::vector<double> values(8 * 16, 0.5);
  WriteAll(File("x64.npy"), NpyBytes({8, 1, 4, 4}, values, /*f64=*/true));
  ExpectFails({"eval", File("model.onnx"), "--data", File("x64.npy")}, {2}, {"x64.npy", "double"});
  ExpectFails({"calibrate", File("model.onnx"), "--data", File("x64.npy"), "-o", File("o9")}, {2},
              {"x64.npy", "double"});
  ExpectFails({"diagnose", File("model.onnx"), "--data", File("x64.npy")}, {2},
              {"x64.npy", "double"});
  ExpectFails({"run", File("model.onnx"), "--input", "x=" + File("x64.npy"), "-o", File("o9r")},
              {2}, {"double"});
}

// ---------------------------------------------------------------- item 12: lint says so
TEST_F(Hostile, Item12_LintOnAFloatOrBrokenModelSaysSo) {
  const RunResult r = Run({"lint", File("model.onnx")});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("QK013"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nothing to lint"), std::string::npos) << r.out;
  // A Reshape that no input can satisfy (16 values into rows of 7) cannot run: an error, not
  // "0 errors".
  WriteAll(File("broken.onnx"), ParseModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N,1,4,4] x) => (float[N,7] y) <int64[2] shape = {-1, 7}> { y = Reshape(x, shape) })"));
  ExpectFails({"lint", File("broken.onnx")}, {2}, {"broken.onnx", "cannot run"});
}

// ---------------------------------------------------------------- beyond the list: a matrix
// Hostile files x every command that reads them: none may crash, hang, balloon or leave output.
TEST_F(Hostile, EveryCommandFailsCleanlyOnEveryHostileFile) {
  const std::string good = ReadAll(File("model.onnx"));
  std::map<std::string, std::string> files{
      {"empty.onnx", ""},
      {"garbage.onnx", std::string("\x08\xff\xff\xff\xff\x0f\x3a\x80\x80\x80\x80\x10", 12)},
      {"truncated.onnx", good.substr(0, good.size() / 2)},
  };
  for (const auto& [name, bytes] : files) WriteAll(File(name), bytes);
  const std::string out = File("matrix_out");
  std::filesystem::create_directories(out);
  WriteAll(out + "/keep.txt", "user file");
  for (const auto& [name, bytes] : files) {
    const std::string m = File(name);
    const std::vector<std::vector<std::string>> commands{
        {"inspect", m},
        {"lint", m},
        {"run", m, "--input", "x=" + File("x.npy"), "-o", out},
        {"calibrate", m, "--data", File("x.npy"), "-o", out, "-q"},
        {"convert", m, out + "/float.onnx"},
        {"eval", m, "--data", File("x.npy"), "-q"},
        {"diagnose", m, "--data", File("x.npy"), "-o", out},
    };
    for (const auto& args : commands) ExpectFails(args, {2, 3}, {name}, out);
  }
  // Bad data files against the good model.
  std::map<std::string, std::string> data{
      {"bad_magic.npy", "NOTNUMPY"},
      {"huge_shape.npy", NpyBytes({1000000000, 1, 4, 4}, {})},
      {"neg_shape.npy", NpyBytes({-1, 1, 4, 4}, {})},
      {"short.npy", NpyBytes({8, 1, 4, 4}, {1, 2, 3})},
      {"zip.npz", "PK\x03\x04garbage"},
  };
  for (const auto& [name, bytes] : data) {
    WriteAll(File(name), bytes);
    ExpectFails({"calibrate", File("model.onnx"), "--data", File(name), "-o", out, "-q"}, {2, 5},
                {name}, out);
  }
  // Bad caches and ranges.
  std::map<std::string, std::string> caches{
      {"nohdr.cache", "x: 3c010a14\n"},
      {"badhex.cache", "TRT-8601-EntropyCalibration2\nx: zzzz\n"},
      {"binary.cache", std::string("TRT-8601-E\x00\x1b[31m\n\x01\x02\n", 20)},
  };
  for (const auto& [name, bytes] : caches) {
    WriteAll(File(name), bytes);
    ExpectFails({"convert", File(name), out + "/x.txt"}, {2}, {name}, out);
  }
}

}  // namespace
}  // namespace quantkit::testing
