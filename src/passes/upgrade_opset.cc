#include "passes/upgrade_opset.h"

#include <fmt/format.h>

#include <set>
#include <string>

#include "common/check.h"
#include "ir/verifier.h"

namespace quantkit::passes {
namespace {

// The reductions whose axes moved from attribute to input at opset 18 (ReduceSum moved at 13).
const std::set<std::string>& ReductionsAxesInputAt18() {
  static const std::set<std::string> ops{"ReduceMean",   "ReduceMax",       "ReduceMin",
                                         "ReduceProd",   "ReduceL1",        "ReduceL2",
                                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  return ops;
}

}  // namespace

Status UpgradeOpset::Run(ir::Model& model, PassReport* report) const {
  const int64_t opset = model.OpsetFor("");
  report->Add(counter::kNodesConverted, 0);
  if (opset >= target_) return Status::Ok();
  QK_RETURN_IF_NOT(opset >= 13 && target_ <= 21, StatusCode::kUnsupported,
                   "default-domain opset {} cannot be upgraded to {} here (13..18 -> 19..21 only)",
                   opset, target_);
  int64_t converted = 0;
  Status status;
  ir::ForEachGraph(*model.graph, [&](ir::Graph& g) {
    for (ir::Node* n : g.nodes()) {
      if (!status.ok() || !n->domain().empty()) continue;
      if (opset < 18 && target_ >= 18 && ReductionsAxesInputAt18().count(n->op_type()) &&
          n->has_attr("axes")) {
        const std::vector<int64_t> axes = n->GetInts("axes");
        ir::Tensor t = ir::Tensor::FromVector<int64_t>(ir::DType::kInt64,
                                                       {static_cast<int64_t>(axes.size())}, axes);
        ir::Value* v = g.AddInitializer(
            g.UniqueValueName(n->name.empty() ? "axes" : n->name + "_axes"), std::move(t));
        v->type = ir::TypeInfo::Tensor(ir::DType::kInt64,
                                       {ir::Dim::Known(static_cast<int64_t>(axes.size()))});
        auto& attrs = n->attributes();
        for (auto it = attrs.begin(); it != attrs.end(); ++it) {
          if (it->name == "axes") {
            attrs.erase(it);
            break;
          }
        }
        g.SetNodeInput(n, 1, v);
        ++converted;
      } else if (opset < 16 && target_ >= 16 && n->op_type() == "RoiAlign" &&
                 !n->has_attr("coordinate_transformation_mode")) {
        n->SetAttr(ir::Attribute::String("coordinate_transformation_mode", "output_half_pixel"));
        ++converted;
      }
    }
  });
  QK_RETURN_IF_ERROR(status);
  model.SetOpset("", target_);
  if (model.ir_version < kFloat16QdqIrVersion) model.ir_version = kFloat16QdqIrVersion;
  QK_RETURN_IF_ERROR(ir::Verify(model));
  report->Add(counter::kNodesConverted, converted);
  report->changed = true;
  report->summary = fmt::format("opset {} -> {} ({} node(s) rewritten)", opset, target_, converted);
  return Status::Ok();
}

}  // namespace quantkit::passes
