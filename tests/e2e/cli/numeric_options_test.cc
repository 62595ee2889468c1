// Issue #27, "one rule for every numeric option": walks every subcommand's options as `--help`
// lists them (the documented acceptance: "INT:[1,65536]", "FLOAT:(0,10]"), feeds each numeric
// option -1, 0, NaN, Inf and 1e12 on a command line that otherwise works, and checks each run:
//
//   outside the declared range (or not finite, or a fraction for an integer): exit 2 before any
//   work, one line naming the option and its range;
//   inside: the command runs (exit 0, or 1 for "findings", as documented);
//   always: no signal, no hang (a time limit), no internal error (70), peak RSS < 1 GB.
//
// A numeric option without a declared range cannot exist (the binary refuses to start: exit 70,
// tools/quantkit/numeric_options.h), and a subcommand without a base command line here fails
// this test, so a new option or subcommand is covered as soon as it is added.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/hostile_fixture.h"

namespace quantkit::testing {
namespace {

namespace fs = std::filesystem;

// Runs that may work for seconds (qat, diagnose) on a loaded machine, with a sanitizer.
constexpr int kWalkTimeoutSeconds = 300;
// Runs in flight at once (the machine has two cores).
constexpr size_t kParallelRuns = 2;

struct NumericOption {
  std::string command;  // "calibrate", "cache diff"; "" for the options of quantkit itself
  std::string name;     // --samples
  std::string type;     // INT, UINT, FLOAT
  double lo = 0, hi = 0;
  bool lo_exclusive = false;
  std::string range;  // as --help prints it
};

std::vector<std::string> Words(const std::string& command) {
  std::vector<std::string> out;
  std::istringstream in(command);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The subcommands a help text lists ("Subcommands:" then one per line).
std::vector<std::string> Subcommands(const std::string& help) {
  std::vector<std::string> out;
  const size_t at = help.find("Subcommands:\n");
  if (at == std::string::npos) return out;
  std::istringstream in(help.substr(at + 13));
  for (std::string line; std::getline(in, line) && !line.empty();) {
    // A subcommand's line is indented by two spaces; deeper lines continue its description.
    if (line.size() < 3 || line.compare(0, 2, "  ") != 0 || line[2] == ' ') continue;
    std::istringstream words(line);
    std::string name;
    if (words >> name) out.push_back(name);
  }
  return out;
}

std::vector<NumericOption> NumericOptions(const std::string& help, const std::string& command) {
  static const std::regex kLine(
      R"((--[A-Za-z0-9-]+)\s+(INT|UINT|FLOAT)(?::([\[(])([^,\]]+),([^\]\s]+)\])?(?=[\s=]|$))");
  std::vector<NumericOption> out;
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, kLine)) continue;
    NumericOption o;
    o.command = command;
    o.name = m[1];
    o.type = m[2];
    EXPECT_TRUE(m[3].matched) << "quantkit " << command << " " << o.name
                              << " declares no range: " << line;
    if (!m[3].matched) continue;
    o.lo_exclusive = m[3] == "(";
    o.lo = std::stod(m[4]);
    o.hi = std::stod(m[5]);
    o.range = std::string(m[3]) + std::string(m[4]) + "," + std::string(m[5]) + "]";
    out.push_back(o);
  }
  return out;
}

bool Accepts(const NumericOption& o, double v) {
  if (!std::isfinite(v)) return false;
  if (o.type != "FLOAT" && v != std::floor(v)) return false;
  return (o.lo_exclusive ? v > o.lo : v >= o.lo) && v <= o.hi;
}

// The Hostile fixture's model and data (hostile_fixture.h), plus a plan and a cache to feed.
class NumericOptionsWalk : public Hostile {
 protected:
  void SetUp() override {
    Hostile::SetUp();
    const RunResult cal =
        Run({"calibrate", File("model.onnx"), "--data", File("x.npy"), "-o", File("cal"), "-q"});
    ASSERT_EQ(cal.exit_code, 0) << cal.err;
  }

  // A command line that works, to which one option is appended; OUT is a fresh directory.
  std::vector<std::string> Base(const std::string& command, const std::string& out) const {
    const std::string m = dir_ + "/model.onnx", x = dir_ + "/x.npy", plan = dir_ + "/cal/plan.json",
                      cache = dir_ + "/cal/calib.cache";
    const std::map<std::string, std::vector<std::string>> base{
        {"", {"inspect", m}},
        {"calibrate", {"calibrate", m, "--data", x, "-o", out, "-q"}},
        {"diagnose", {"diagnose", m, "--data", x, "-q"}},
        {"eval", {"eval", m, "--data", x, "-q"}},
        {"analyze", {"analyze", m, "--plan", plan, "--data", x, "-q"}},
        {"fallback", {"fallback", m, "--plan", plan, "--data", x, "-q"}},
        {"qat",
         {"qat", m, "--data", x, "-o", out, "--steps", "2", "--batch-size", "4", "--calib-samples",
          "8", "-q"}},
        {"data", {"data", m, "--data", x, "-o", out}},
        {"convert", {"convert", cache, out + ".txt"}},
        {"lint", {"lint", m}},
        {"cache", {"cache", "inspect", cache}},
        {"cache inspect", {"cache", "inspect", cache}},
        {"cache diff", {"cache", "diff", cache, cache}},
        {"cache check", {"cache", "check", cache, "--model", m}},
        {"inspect", {"inspect", m}},
        {"tensor-calib", {"tensor-calib", x}},
        {"run", {"run", m, "--input", "x=" + x, "-o", out}},
    };
    auto it = base.find(command);
    EXPECT_NE(it, base.end()) << "no working command line for `quantkit " << command
                              << "` in numeric_options_test.cc: add one to Base()";
    return it == base.end() ? std::vector<std::string>{} : it->second;
  }

  std::string Help(const std::string& command) const {
    std::vector<std::string> args = Words(command);
    args.push_back("--help");
    const RunResult r = RunQuantkit(args, dir_);
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    return r.out;
  }

  // Every command with its numeric options (quantkit itself first, then subcommands, then theirs).
  std::vector<NumericOption> AllNumericOptions(std::set<std::string>* commands) const {
    std::vector<NumericOption> all;
    std::vector<std::string> todo{""};
    while (!todo.empty()) {
      const std::string command = todo.back();
      todo.pop_back();
      commands->insert(command);
      const std::string help = Help(command);
      for (const NumericOption& o : NumericOptions(help, command)) {
        // Options of quantkit itself reappear in each subcommand's help (fallthrough): once.
        const bool global = std::any_of(all.begin(), all.end(), [&](const NumericOption& g) {
          return g.command.empty() && g.name == o.name;
        });
        if (!global) all.push_back(o);
      }
      for (const std::string& sub : Subcommands(help))
        todo.push_back(command.empty() ? sub : command + " " + sub);
    }
    return all;
  }
};

// Options whose upper bound is the data's size (qat's held-out samples must leave a batch to
// train on): a value inside the declared range may still be refused, with exit 2.
bool DataBound(const NumericOption& o) { return o.command == "qat" && o.name == "--holdout"; }

TEST_F(NumericOptionsWalk, EveryNumericOptionRefusesOrRunsCleanly) {
  std::set<std::string> commands;
  const std::vector<NumericOption> options = AllNumericOptions(&commands);
  for (const std::string& c : commands) Base(c, "");  // every command has a working line
  // The walk saw the options this issue is about, so a change of the help format cannot make
  // it pass by finding nothing.
  std::set<std::string> seen;
  for (const NumericOption& o : options) seen.insert(o.command + " " + o.name);
  for (const char* must :
       {" --threads", " --max-tensor-mb", "calibrate --samples", "calibrate --batch-size",
        "diagnose --bootstrap", "analyze --top", "cache diff --rtol", "tensor-calib --bins",
        "qat --weight-decay", "qat --temperature", "qat --warmup", "calibrate --scale"}) {
    EXPECT_TRUE(seen.count(must)) << "the walk did not find `quantkit " << must << "`";
  }

  struct Case {
    NumericOption option;
    std::string value;
    bool accepted;
    std::vector<std::string> args;
    std::string scratch;
  };
  std::vector<Case> cases;
  const std::vector<std::pair<std::string, double>> values{
      {"-1", -1}, {"0", 0}, {"nan", NAN}, {"inf", INFINITY}, {"1e12", 1e12}};
  for (const NumericOption& o : options) {
    for (const auto& [text, v] : values) {
      Case c{o, text, Accepts(o, v), {}, dir_ + "/run" + std::to_string(cases.size())};
      fs::create_directories(c.scratch);
      c.args = Base(o.command, c.scratch + "/out");
      // An option the working line sets already (qat --steps) takes the value there: options
      // given twice are refused as such, which is not what this walk checks.
      auto given = std::find(c.args.begin(), c.args.end(), o.name);
      if (given != c.args.end() && given + 1 != c.args.end()) {
        *(given + 1) = text;
      } else {
        c.args.push_back(o.name);
        c.args.push_back(text);
      }
      cases.push_back(std::move(c));
    }
  }
  size_t accepted_runs = 0;
  for (size_t first = 0; first < cases.size(); first += kParallelRuns) {
    std::vector<std::future<RunResult>> running;
    for (size_t i = first; i < std::min(cases.size(), first + kParallelRuns); ++i) {
      running.push_back(std::async(std::launch::async, [&cases, i] {
        return RunQuantkit(cases[i].args, cases[i].scratch, kWalkTimeoutSeconds);
      }));
    }
    for (size_t i = first; i < std::min(cases.size(), first + kParallelRuns); ++i) {
      const Case& c = cases[i];
      const RunResult r = running[i - first].get();
      std::string what = "quantkit";
      for (const std::string& a : c.args) what += " " + a;
      SCOPED_TRACE(what);
      EXPECT_FALSE(r.timed_out) << "hung";
      EXPECT_EQ(r.signal, 0) << r.err;
      EXPECT_NE(r.exit_code, 70) << r.err;
      EXPECT_LT(r.max_rss_kb, kMaxRssKb);
      if (!c.accepted) {
        ExpectCleanFailure(r, {2}, {c.option.name, c.option.range}, what);
      } else if (DataBound(c.option) && r.exit_code == 2) {
        // A size bounded by the data, not by a range the help can declare: refused as bad input,
        // cleanly and naming the option.
        ExpectCleanFailure(r, {2}, {c.option.name}, what);
      } else {
        ++accepted_runs;
        EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1)
            << "a value inside " << c.option.range << " was not taken: exit " << r.exit_code << "\n"
            << r.err;
      }
    }
  }
  EXPECT_GT(accepted_runs, 0u);
  std::printf(
      "walked %zu numeric options of %zu commands: %zu runs, %zu inside the declared ranges\n",
      options.size(), commands.size(), cases.size(), accepted_runs);
}

}  // namespace
}  // namespace quantkit::testing
