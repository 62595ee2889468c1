// QAT steps 2 and 3: the start plan, and the student's training graph built from it.
#include <fmt/ranges.h>

#include <iterator>
#include <set>

#include "analysis/model_loading.h"
#include "common/check.h"
#include "ir/scopes.h"
#include "passes/apply_plan.h"
#include "passes/fake_quant.h"
#include "passes/float_precision.h"
#include "pipelines/calibrate/calibrate.h"
#include "pipelines/qat/steps.h"

namespace quantkit::pipelines::qat {

namespace {

// The ops whose weights QAT trains.
bool IsWeighted(const ir::Node& n) {
  static const std::set<std::string> kWeighted{"Conv", "ConvTranspose", "Gemm", "MatMul"};
  return n.domain().empty() && kWeighted.count(n.op_type()) > 0;
}

// Initializers the optimizer updates: weights (behind their FakeQuantize) and biases of the
// weighted ops, normalization scale and shift, and learned activation scales.
std::vector<std::string> TrainableParameters(
    const ir::Graph& g, const std::map<std::string, std::string>& learned_scales) {
  static const std::set<std::string> kNorms{"BatchNormalization", "LayerNormalization",
                                            "InstanceNormalization", "GroupNormalization"};
  std::vector<std::string> names;
  std::set<std::string> seen;
  auto add = [&](const ir::Value* v) {
    if (v && v->producer() && v->producer()->op_type() == "FakeQuantize")
      v = v->producer()->input(0);
    if (v && v->is_constant() && v->initializer->dtype() == ir::DType::kFloat &&
        seen.insert(v->name()).second) {
      names.push_back(v->name());
    }
  };
  for (const ir::Node* n : g.nodes()) {
    if (!n->domain().empty()) continue;
    if (IsWeighted(*n)) {
      for (const ir::Value* v : n->inputs()) add(v);
    } else if (kNorms.count(n->op_type())) {
      add(n->input(1));
      add(n->input(2));
    }
  }
  for (const auto& [tensor, scale] : learned_scales) add(g.FindValue(scale));
  return names;
}

}  // namespace

// Why the logits: distilling probabilities weighs only the confident classes (PP-OCRv4 rec's 6625
// per frame, most below 1e-5), and KL of a softmax of probabilities is not the classic objective
// (Hinton et al. 2015: KL of the tempered softmax of the logits). Below opset 13 Softmax flattens
// from its axis, and the opset upgrade writes that as Reshape(Softmax(Flatten(x, k)), Shape(x))
// (onnx/opset_upgrade.cc): either is a softmax per position over one axis only when that axis is
// the last. nullopt otherwise.
std::optional<train::DistillTarget> SoftmaxLogits(const ir::Model& student,
                                                  const ir::Model& teacher) {
  struct Found {
    std::string logits;
    int64_t axis = -1;
  };
  auto is = [](const ir::Node* n, const char* op) {
    return n != nullptr && n->domain().empty() && n->op_type() == op;
  };
  auto find = [&is](const ir::Model& m) -> std::optional<Found> {
    const ir::Graph& g = *m.graph;
    if (g.outputs().empty() || !g.outputs().front()->type.has_shape) return std::nullopt;
    const ir::Value* out = g.outputs().front();
    const int64_t rank = static_cast<int64_t>(out->type.dims.size());
    const ir::Node* n = out->producer();
    if (rank < 2 || n == nullptr) return std::nullopt;
    const int64_t opset = m.OpsetFor("");
    if (is(n, "Softmax")) {
      int64_t axis = n->GetInt("axis", opset >= 13 ? -1 : 1);
      if (axis < 0) axis += rank;
      if (axis < 1 || axis >= rank || (opset < 13 && axis != rank - 1)) return std::nullopt;
      return Found{n->input(0)->name(), axis};
    }
    // The upgraded form: Reshape(Softmax<-1 or 1>(Flatten<k>(x)), Shape(x)), k the last axis of x.
    if (!is(n, "Reshape") || n->num_inputs() < 2) return std::nullopt;
    const ir::Node* softmax = n->input(0)->producer();
    const ir::Node* shape = n->input(1)->producer();
    if (!is(softmax, "Softmax") || !is(shape, "Shape")) return std::nullopt;
    const int64_t softmax_axis = softmax->GetInt("axis", opset >= 13 ? -1 : 1);
    const ir::Node* flatten = softmax->input(0)->producer();
    if ((softmax_axis != -1 && softmax_axis != 1) || !is(flatten, "Flatten")) return std::nullopt;
    const ir::Value* x = flatten->input(0);
    int64_t k = flatten->GetInt("axis", 1);
    if (k < 0) k += rank;
    if (shape->input(0) != x || k != rank - 1) return std::nullopt;
    return Found{x->name(), k};
  };
  const std::optional<Found> s = find(student), t = find(teacher);
  if (!s || !t || s->axis != t->axis) return std::nullopt;
  return train::DistillTarget{s->logits, t->logits, s->axis};
}

Result<ir::Model> LoadFolded(const std::string& path, int* folded) {
  QK_ASSIGN_OR_RETURN(ir::Model m, analysis::LoadModelForQuantization(path));
  QK_ASSIGN_OR_RETURN(passes::PassReport bn, passes::RunPass(m, passes::FoldBatchNorm()));
  if (folded) *folded = static_cast<int>(bn.Count(passes::counter::kFolded));
  return m;
}

Result<StartPlan> MakeStartPlan(const QatOptions& o) {
  StartPlan start;
  if (!o.plan.empty()) {
    QK_ASSIGN_OR_RETURN(start.plan, analysis::ReadPlanFile(o.plan));
    // A plan for another model is refused here as eval, analyze and fallback refuse it (it
    // trained nothing it named and still wrote a full output set).
    QK_ASSIGN_OR_RETURN(ir::Model model, analysis::LoadModelForQuantization(o.model));
    const Result<std::vector<std::string>> unmatched =
        analysis::UnmatchedPlanTensors(*model.graph, start.plan, o.model);
    if (!unmatched.ok()) return unmatched.status().WithContext(o.plan);
    QK_RETURN_IF_ERROR(analysis::CheckPlanFloatModel(start.plan, o.model).WithContext(o.plan));
    if (o.floats) {
      quant::FloatPrecision& fp = start.plan.float_precision;
      const quant::FloatDType before = fp.dtype;
      QK_RETURN_IF_ERROR(passes::ResolveFloatOptions(*model.graph, *o.floats, &fp));
      if (fp.dtype != before) {
        fp.fp32_tensors.clear();  // decided for another dtype: the plan's ranges decide
        passes::MarkPlanRangeFp32Tensors(&start.plan);
      }
    }
  } else {
    CalibrateOptions c;
    c.model = o.model;
    c.data = o.calib_data.empty() ? o.data : o.calib_data;
    c.image = o.image;
    c.samples = o.calib_samples;
    c.method = o.method;
    c.placement = o.placement;
    c.progress = o.progress;
    // The export's FP32 islands, from these statistics.
    c.floats = o.floats.value_or(passes::FloatOptions{});
    QK_ASSIGN_OR_RETURN(CalibrateResult cal, Calibrate(c));
    start.plan = std::move(cal.plan);
  }
  // Weight scales follow the fine-tuned weights unless frozen: drop the plan's so that
  // ApplyPlan recomputes them (max|w|/127 per channel) from the weights it is given.
  start.train = start.plan;
  // Training runs in FP32; the export types the float part (plan.float_precision).
  start.train.float_precision = quant::FloatPrecision{};
  if (o.recompute_weight_scales) {
    for (auto it = start.train.tensors.begin(); it != start.train.tensors.end();) {
      it = it->second.role == quant::TensorRole::kWeight ? start.train.tensors.erase(it)
                                                         : std::next(it);
    }
  }
  start.sim.placement = o.placement;
  return start;
}

namespace {

// --teacher: the same graph inputs (names, in order) and the same first output name as the model.
Status CheckSameInterface(const std::string& model_path, const ir::Graph& model,
                          const std::string& teacher_path, const ir::Graph& teacher) {
  auto names = [](const std::vector<ir::Value*>& values) {
    std::vector<std::string> n;
    for (const ir::Value* v : values) n.push_back(v->name());
    return n;
  };
  const std::vector<std::string> in_m = names(model.inputs()), in_t = names(teacher.inputs());
  const std::vector<std::string> out_m = names(model.outputs()), out_t = names(teacher.outputs());
  QK_RETURN_IF_NOT(
      in_m == in_t && !out_m.empty() && !out_t.empty() && out_m[0] == out_t[0],
      StatusCode::kInvalidArgument,
      "--teacher {}: its inputs ({}) and first output ('{}') are not those of {} ({}; '{}')",
      teacher_path, fmt::join(in_t, ", "), out_t.empty() ? "" : out_t[0], model_path,
      fmt::join(in_m, ", "), out_m.empty() ? "" : out_m[0]);
  return Status::Ok();
}

}  // namespace

Result<Graphs> PrepareGraphs(const QatOptions& o, StartPlan* plan, QatResult* result) {
  Graphs g;
  QK_ASSIGN_OR_RETURN(g.student, LoadFolded(o.model, &result->folded_batch_norms));
  {
    quant::QuantPlan p = plan->train;
    QK_ASSIGN_OR_RETURN(passes::PassReport inserted,
                        passes::RunPass(g.student, passes::ApplyPlan(&p, plan->sim)));
    QK_RETURN_IF_NOT(inserted.changed, StatusCode::kInvalidArgument,
                     "the plan quantizes nothing in '{}': nothing to fine-tune", o.model);
    // Frozen weight scales: keep those just filled for BN-folded weights too, so the export
    // writes the scales training used.
    if (!o.recompute_weight_scales) plan->train = std::move(p);
  }
  passes::FakeQuantOptions fq_options;
  fq_options.recompute_weight_scales = o.recompute_weight_scales;
  fq_options.learn_activation_scales = o.learn_activation_scales;
  QK_ASSIGN_OR_RETURN(passes::PassReport fq,
                      passes::RunPass(g.student, passes::QdqToFakeQuant(fq_options)));
  result->weight_pairs = static_cast<int>(fq.Count(passes::counter::kWeightPairs));
  result->activation_pairs = static_cast<int>(fq.Count(passes::counter::kActivationPairs));
  g.learned_scales = passes::LearnedActivationScales(*g.student.graph);
  g.parameters = TrainableParameters(*g.student.graph, g.learned_scales);
  result->parameters = static_cast<int>(g.parameters.size());
  if (g.parameters.empty()) {
    // Say why before any training: the weighted layers of a model like Silero VAD all sit in If
    // bodies, whose branches the trainer does not differentiate.
    int nested = 0;
    ir::ForEachScopedGraph(*g.student.graph, [&](const ir::Graph& graph, const std::string&) {
      if (&graph == g.student.graph.get()) return;
      for (const ir::Node* n : graph.nodes()) nested += IsWeighted(*n) ? 1 : 0;
    });
    return MakeStatus(
        StatusCode::kUnsupported, "{}: nothing to train: {}", o.model,
        nested > 0
            ? fmt::format("its {} weighted layers are all inside If/Loop bodies, which QAT does "
                          "not train (calibrate quantizes them: use its model.qdq.onnx)",
                          nested)
            : std::string("the main graph has no weighted layer (Conv, Gemm, MatMul) or norm"));
  }
  QK_ASSIGN_OR_RETURN(g.teacher, analysis::LoadModelForQuantization(o.teacher_path()));
  if (!o.teacher.empty())
    QK_RETURN_IF_ERROR(CheckSameInterface(o.model, *g.student.graph, o.teacher, *g.teacher.graph));
  return g;
}

}  // namespace quantkit::pipelines::qat
