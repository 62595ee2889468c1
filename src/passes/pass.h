// The one contract every graph rewrite of quantkit follows, and the runner that composes them.
//
//   class MyPass final : public Pass {
//     const char* Name() const override { return "my_pass"; }
//     Status Run(ir::Model& model, PassReport* report) const override;
//   };
//
// A pass takes its parameters (a plan, options) in its constructor and the model in Run, so every
// pass runs the same way: alone through RunPass, or in order through RunPasses. It reports what it
// did in one PassReport (changed, named counts, named lists, notes, a summary line for users)
// instead of `bool* changed`, `int* folded` or a struct of its own. The workflows (pipelines/)
// print the reports' summary lines; a pass prints nothing.
//
// Contract of Run (modelled on onnxruntime's GraphTransformer):
//   - requires a model that passes ir::Verify;
//   - checks everything it can before mutating (a refused rewrite leaves the model as it was);
//   - on success the model passes ir::Verify, and `report->changed` is true exactly when the
//     model was rewritten;
//   - a normalizing pass (constant folding, Q/DQ stripping, ...) is idempotent: a second run
//     reports changed == false. Insertion passes (InsertQdq, ApplyPlan) add what their plan says
//     each time they run and are not meant to run twice on one model.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::passes {

// The counters and lists passes report, one vocabulary so that a reader cannot ask for a name no
// pass writes (PassReport::Count and List check that the pass reported it).
namespace counter {
inline constexpr std::string_view kPromoted = "promoted";  // Constant nodes -> initializers
inline constexpr std::string_view kFolded = "folded";      // nodes folded into constants / branches
inline constexpr std::string_view kActivationPairs = "activation_pairs";
inline constexpr std::string_view kWeightPairs = "weight_pairs";
inline constexpr std::string_view kPairsRemoved = "pairs_removed";
inline constexpr std::string_view kWeightsDequantized = "weights_dequantized";
inline constexpr std::string_view kLeftInPlace = "left_in_place";
inline constexpr std::string_view kInitializersRemoved = "initializers_removed";
inline constexpr std::string_view kNodesConverted = "nodes_converted";  // integer ops -> float ops
inline constexpr std::string_view kPassthroughNodes =
    "passthrough_nodes";  // shape ops moved to float
inline constexpr std::string_view kRelusRestored = "relus_restored";
inline constexpr std::string_view kCastsInserted = "casts_inserted";  // float dtype boundaries
inline constexpr std::string_view kFp32Nodes = "fp32_nodes";          // nodes kept in FP32
}  // namespace counter
namespace list {
inline constexpr std::string_view kSkipped = "skipped";  // "tensor: reason", sites left float
inline constexpr std::string_view kDynamicTensors =
    "dynamic_tensors";                                   // quantized by DynamicQuantizeLinear
inline constexpr std::string_view kWeights = "weights";  // weight initializers quantized
inline constexpr std::string_view kFp32NodeReasons =
    "fp32_nodes";  // "node (Op): why it stays FP32"
}  // namespace list

// What one pass did.
struct PassReport {
  std::string pass;      // the pass's Name()
  bool changed = false;  // the model was rewritten
  std::map<std::string, int64_t, std::less<>> counts;
  std::map<std::string, std::vector<std::string>, std::less<>> lists;
  std::vector<std::string> notes;  // warnings a user should read
  std::string summary;             // one line for users ("" when there is nothing to say)

  // Adds n to a counter (creating it at 0: a pass reports its counters even when they stay 0).
  void Add(std::string_view name, int64_t n = 1);
  // A counter the pass reported; asking for one it never reports is a programming error
  // (QK_CHECK), not a silent 0.
  int64_t Count(std::string_view name) const;
  // Appends to a named list (creating it).
  void Append(std::string_view name, std::string item);
  // A list the pass reported (checked like Count).
  const std::vector<std::string>& List(std::string_view name) const;
};

class Pass {
 public:
  virtual ~Pass() = default;
  // snake_case, unique among passes; names the pass in reports and errors.
  virtual const char* Name() const = 0;
  // Rewrites `model`, filling `*report` (never null; the runner sets report->pass).
  virtual Status Run(ir::Model& model, PassReport* report) const = 0;
};

// Runs one pass. An error is prefixed with "pass '<name>'", so a user sees which rewrite refused.
Result<PassReport> RunPass(ir::Model& model, const Pass& pass);

// Runs `passes` in order and appends each finished pass's report to `*reports` (may be null).
// Stops at the first failing pass: its error names it, and later passes do not run.
Status RunPasses(ir::Model& model, const std::vector<const Pass*>& passes,
                 std::vector<PassReport>* reports = nullptr);

// The report of the pass named `name` among `reports`, or null.
const PassReport* FindReport(const std::vector<PassReport>& reports, std::string_view name);

}  // namespace quantkit::passes
