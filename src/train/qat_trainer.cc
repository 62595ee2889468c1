// QatTrainer: teacher/student forward, loss, backward and libtorch optimizer steps.
#include "train/qat_trainer.h"

#include <fmt/ranges.h>

#include <torch/optim.h>

#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "common/check.h"
#include "runtime/aten_bridge.h"
#include "runtime/aten_guard.h"
#include "runtime/device_placement.h"
#include "runtime/interpreter_aten.h"
#include "train/checkpoint_io.h"

namespace quantkit::train {

// The interpreter's ATen level, which training drives from inside (runtime/interpreter_aten.h).
using runtime::AtenRunOptions;
using runtime::CopyToAten;
using runtime::DefaultDevice;
using runtime::Device;
using runtime::Guarded;
using runtime::Interpreter;
using runtime::InterpreterOptions;
using runtime::NamedTensor;
using runtime::RunAten;
using runtime::ToAtenDevice;
using runtime::ToIrTensor;
using runtime::UseDevice;
using runtime::WrapTensor;

namespace {

constexpr double kPi = 3.14159265358979323846;

using NamedAten = std::vector<std::pair<std::string, at::Tensor>>;

Result<NamedAten> Feeds(const TrainingBatch& batch) {
  NamedAten feeds;
  for (const NamedTensor& in : batch.inputs) {
    QK_ASSIGN_OR_RETURN(at::Tensor a, WrapTensor(in.tensor, "input '" + in.name + "'"));
    feeds.emplace_back(in.name, a);
  }
  return feeds;
}

// Captures named intermediate tensors of one run (feature distillation).
AtenRunOptions Capturing(const std::vector<std::string>& names,
                         std::map<std::string, at::Tensor>* out) {
  AtenRunOptions o;
  if (names.empty()) return o;
  auto wanted = std::make_shared<std::unordered_set<std::string>>(names.begin(), names.end());
  o.hook = [wanted, out](const std::string& name, const ir::Node*, at::Tensor& value) {
    if (wanted->count(name)) (*out)[name] = value;
    return Status::Ok();
  };
  return o;
}

// D of the header: MSE, or KL over the target's class axis (each position's distribution; the mean
// over batch and positions) or, without one, over everything but the batch axis.
at::Tensor Distillation(const TrainerOptions& o, const at::Tensor& student,
                        const at::Tensor& teacher) {
  if (o.distill == DistillLoss::kMse) return at::mse_loss(student, teacher);
  const double tau = o.temperature;
  const int64_t axis = o.distill_on.axis;
  const at::Tensor s = axis >= 0 ? student : student.flatten(1);
  const at::Tensor t = axis >= 0 ? teacher : teacher.flatten(1);
  const int64_t classes_axis = axis >= 0 ? axis : 1;
  const at::Tensor log_p = at::log_softmax(s / tau, classes_axis);
  const at::Tensor target = at::softmax(t / tau, classes_axis);
  const double distributions =
      static_cast<double>(s.numel() / std::max<int64_t>(s.size(classes_axis), 1));
  return at::kl_div(log_p, target, at::Reduction::Sum) / distributions * (tau * tau);
}

}  // namespace

struct QatTrainer::Impl {
  TrainerOptions options;
  // Where parameters, optimizer state, activations and gradients live (runtime::DefaultDevice()
  // at creation); batches are copied there and only the loss values come back each step.
  at::Device device = at::kCPU;
  std::unique_ptr<Interpreter> student, teacher;
  std::vector<std::string> names;
  std::vector<at::Tensor> params;  // leaves with requires_grad
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  int64_t step = 0;

  // The gradients out to `reduce` as one float buffer and back. A parameter the loss does not
  // reach has no gradient on any rank (same graph): it travels as zeros and stays without one,
  // so the optimizer skips it as in one process.
  Status ReduceGradients(const GradientReducer& reduce, StepResult* r) {
    std::vector<float> flat;
    for (const at::Tensor& p : params) {
      // Host copies: the reducer works on host memory (Gloo over TCP), the gradients may live on a
      // GPU.
      const at::Tensor g = p.grad().defined() ? p.grad().to(at::kCPU, at::kFloat).contiguous()
                                              : at::zeros(p.sizes(), at::TensorOptions(at::kFloat));
      flat.insert(flat.end(), g.data_ptr<float>(), g.data_ptr<float>() + g.numel());
    }
    const size_t size = flat.size();
    QK_RETURN_IF_ERROR(reduce(&flat, r));
    QK_RETURN_IF_NOT(flat.size() == size, StatusCode::kInternal,
                     "gradient reduction changed the size");
    size_t at = 0;
    at::NoGradGuard no_grad;
    for (at::Tensor& p : params) {
      if (p.grad().defined())
        p.mutable_grad().copy_(at::from_blob(flat.data() + at, p.sizes(), at::kFloat));
      at += static_cast<size_t>(p.numel());
    }
    return Status::Ok();
  }

  NamedAten ParameterFeeds() const {
    NamedAten p;
    for (size_t i = 0; i < names.size(); ++i) p.emplace_back(names[i], params[i]);
    return p;
  }
  void SetLr(double lr) {
    for (auto& group : optimizer->param_groups()) {
      if (options.optimizer == OptimizerKind::kSgd) {
        static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
      } else {
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
      }
    }
  }
};

QatTrainer::QatTrainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
QatTrainer::~QatTrainer() = default;

Status CheckTrainerOptions(const TrainerOptions& o) {
  // Each must be a finite number in its range: a NaN weight decay reached libtorch ("Invalid
  // weight_decay value: nan", exit 70), a temperature of 0 made every loss NaN.
  auto finite = [](double v, double lo, bool lo_open) {
    return std::isfinite(v) && (lo_open ? v > lo : v >= lo);
  };
  QK_RETURN_IF_NOT(finite(o.lr, 0, true), StatusCode::kInvalidArgument,
                   "learning rate must be > 0, got {}", o.lr);
  QK_RETURN_IF_NOT(finite(o.weight_decay, 0, false), StatusCode::kInvalidArgument,
                   "weight decay must be a finite number >= 0, got {}", o.weight_decay);
  QK_RETURN_IF_NOT(finite(o.momentum, 0, false), StatusCode::kInvalidArgument,
                   "momentum must be a finite number >= 0, got {}", o.momentum);
  QK_RETURN_IF_NOT(finite(o.temperature, 0, true), StatusCode::kInvalidArgument,
                   "KL temperature must be a finite number > 0, got {}", o.temperature);
  for (const auto& [name, w] : {std::pair<const char*, double>{"feature", o.feature_weight},
                                {"label", o.label_weight},
                                {"distillation", o.distill_weight}}) {
    QK_RETURN_IF_NOT(finite(w, 0, false), StatusCode::kInvalidArgument,
                     "{} loss weight must be a finite number >= 0, got {}", name, w);
  }
  QK_RETURN_IF_NOT(o.warmup_steps >= 0, StatusCode::kInvalidArgument,
                   "warm-up steps must be >= 0, got {}", o.warmup_steps);
  return Status::Ok();
}

Result<std::unique_ptr<QatTrainer>> QatTrainer::Create(ir::Model student, ir::Model teacher,
                                                       const std::vector<std::string>& parameters,
                                                       const TrainerOptions& options) {
  QK_RETURN_IF_NOT(options.total_steps > 0, StatusCode::kInvalidArgument,
                   "total steps must be > 0, got {}", options.total_steps);
  QK_RETURN_IF_ERROR(CheckTrainerOptions(options));
  QK_RETURN_IF_NOT(parameters.size() > 0, StatusCode::kInvalidArgument,
                   "nothing to train: no parameters");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const Device device = DefaultDevice();
  QK_RETURN_IF_ERROR(UseDevice(device));
  impl->device = ToAtenDevice(device);
  // Trainable copies of the initializers, taken before the model moves into the interpreter, on
  // the compute device so that they are leaves there (the optimizer updates them in place).
  for (const std::string& name : parameters) {
    const ir::Value* v = student.graph->FindValue(name);
    QK_RETURN_IF_NOT(
        v != nullptr && v->initializer.has_value() && v->initializer->dtype() == ir::DType::kFloat,
        StatusCode::kInvalidArgument, "parameter '{}' is not a float initializer of the model",
        name);
    QK_ASSIGN_OR_RETURN(at::Tensor t, CopyToAten(*v->initializer, "parameter '" + name + "'"));
    impl->names.push_back(name);
    impl->params.push_back(t.to(impl->device).set_requires_grad(true));
  }
  const DistillTarget& target = options.distill_on;
  if (!target.student.empty()) {
    QK_RETURN_IF_NOT(student.graph->FindValue(target.student) != nullptr &&
                         teacher.graph->FindValue(target.teacher) != nullptr,
                     StatusCode::kNotFound,
                     "distillation tensor '{}' / '{}' is not in the student / the FP32 model",
                     target.student, target.teacher);
  }
  QK_RETURN_IF_NOT(
      options.label_logits.empty() || student.graph->FindValue(options.label_logits) != nullptr,
      StatusCode::kNotFound, "cross-entropy tensor '{}' is not in the student",
      options.label_logits);
  for (const std::string& f : options.feature_tensors) {
    QK_RETURN_IF_NOT(
        student.graph->FindValue(f) != nullptr && teacher.graph->FindValue(f) != nullptr,
        StatusCode::kNotFound, "feature tensor '{}' is not in both the student and the FP32 model",
        f);
  }
  InterpreterOptions training;
  training.training = true;
  training.check_finite_inputs = false;
  training.device = device;
  QK_ASSIGN_OR_RETURN(impl->student, Interpreter::Create(std::move(student), training));
  InterpreterOptions plain;
  plain.check_finite_inputs = false;
  plain.device = device;
  QK_ASSIGN_OR_RETURN(impl->teacher, Interpreter::Create(std::move(teacher), plain));
  QK_RETURN_IF_NOT(impl->student->input_names() == impl->teacher->input_names(),
                   StatusCode::kInvalidArgument,
                   "the student and the FP32 model have different inputs");
  QK_RETURN_IF_ERROR(Guarded("creating the optimizer", [&]() -> Status {
    if (options.optimizer == OptimizerKind::kSgd) {
      impl->optimizer = std::make_unique<torch::optim::SGD>(
          impl->params, torch::optim::SGDOptions(options.lr)
                            .momentum(options.momentum)
                            .weight_decay(options.weight_decay));
    } else {
      impl->optimizer = std::make_unique<torch::optim::AdamW>(
          impl->params, torch::optim::AdamWOptions(options.lr).weight_decay(options.weight_decay));
    }
    return Status::Ok();
  }));
  return std::unique_ptr<QatTrainer>(new QatTrainer(std::move(impl)));
}

double QatTrainer::LearningRate(int64_t step) const {
  const TrainerOptions& o = impl_->options;
  if (step < o.warmup_steps)
    return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  const int64_t span = std::max<int64_t>(o.total_steps - o.warmup_steps, 1);
  const double t =
      std::min(1.0, static_cast<double>(step - o.warmup_steps) / static_cast<double>(span));
  return 0.5 * o.lr * (1.0 + std::cos(kPi * t));
}

int64_t QatTrainer::steps_done() const { return impl_->step; }

Result<StepResult> QatTrainer::Step(const TrainingBatch& batch, const GradientReducer& reduce) {
  Impl& m = *impl_;
  const TrainerOptions& o = m.options;
  QK_RETURN_IF_NOT(o.label_weight <= 0 || batch.labels.has_value(), StatusCode::kInvalidArgument,
                   "cross-entropy needs labels, and the training data has none");
  QK_ASSIGN_OR_RETURN(NamedAten feeds, Feeds(batch));
  StepResult r;
  r.lr = LearningRate(m.step);
  Status st = Guarded("QAT step " + std::to_string(m.step), [&]() -> Status {
    std::map<std::string, at::Tensor> teacher_features, student_features;
    const DistillTarget& target = o.distill_on;
    const bool on_target = !target.student.empty();
    std::vector<std::string> teacher_wanted = o.feature_tensors, student_wanted = o.feature_tensors;
    if (on_target) {
      teacher_wanted.push_back(target.teacher);
      student_wanted.push_back(target.student);
    }
    if (!o.label_logits.empty() && o.label_weight > 0) student_wanted.push_back(o.label_logits);
    at::Tensor teacher_out;
    {
      at::NoGradGuard no_grad;
      QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> t,
                          RunAten(*m.teacher, feeds, Capturing(teacher_wanted, &teacher_features)));
      teacher_out = (on_target ? teacher_features.at(target.teacher) : t.at(0)).to(at::kFloat);
    }
    AtenRunOptions run = Capturing(student_wanted, &student_features);
    const NamedAten params = m.ParameterFeeds();
    run.parameters = &params;
    QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> s, RunAten(*m.student, feeds, run));
    const at::Tensor out = s.at(0);
    at::Tensor loss = at::zeros({}, out.options().dtype(at::kFloat));
    if (o.distill_weight > 0) {
      const at::Tensor d =
          Distillation(o, on_target ? student_features.at(target.student) : out, teacher_out);
      r.distill = d.item<double>();
      loss = loss + o.distill_weight * d;
    }
    if (o.label_weight > 0) {
      QK_ASSIGN_OR_RETURN(at::Tensor labels, CopyToAten(*batch.labels, "labels"));
      const at::Tensor logits =
          (o.label_logits.empty() ? out : student_features.at(o.label_logits)).flatten(1);
      const int64_t classes = logits.size(1);
      const int64_t low = labels.numel() > 0 ? labels.min().item<int64_t>() : 0;
      const int64_t high = labels.numel() > 0 ? labels.max().item<int64_t>() : 0;
      QK_RETURN_IF_NOT(
          low >= 0 && high < classes, StatusCode::kInvalidArgument,
          "label {} is out of range for the model's {} outputs (labels must be in [0, {}))",
          low < 0 ? low : high, classes, classes);
      at::Tensor ce = at::cross_entropy_loss(logits, labels.to(out.device(), at::kLong));
      r.label = ce.item<double>();
      loss = loss + o.label_weight * ce;
    }
    if (o.feature_weight > 0 && !o.feature_tensors.empty()) {
      at::Tensor f = at::zeros({}, out.options().dtype(at::kFloat));
      for (const std::string& name : o.feature_tensors) {
        QK_RETURN_IF_NOT(student_features.count(name) && teacher_features.count(name),
                         StatusCode::kInternal, "feature tensor '{}' was not produced", name);
        f = f + at::mse_loss(student_features[name], teacher_features[name].detach());
      }
      f = f / static_cast<double>(o.feature_tensors.size());
      r.feature = f.item<double>();
      loss = loss + o.feature_weight * f;
    }
    student_features.clear();  // drop references into the autograd graph before backward frees it
    r.loss = loss.item<double>();
    QK_RETURN_IF_NOT(std::isfinite(r.loss), StatusCode::kInvalidArgument,
                     "QAT step {}: the loss is {} (learning rate {} too high?)", m.step, r.loss,
                     r.lr);
    m.optimizer->zero_grad();
    loss.backward();  // retain_graph=false: frees the saved activations
    if (reduce) QK_RETURN_IF_ERROR(m.ReduceGradients(reduce, &r));
    m.SetLr(r.lr);
    m.optimizer->step();
    return Status::Ok();
  });
  QK_RETURN_IF_ERROR(st);
  ++m.step;
  return r;
}

Result<ir::Tensor> QatTrainer::StudentOutput(const TrainingBatch& batch) const {
  return FirstOutput(batch, /*student=*/true);
}

Result<ir::Tensor> QatTrainer::TeacherOutput(const TrainingBatch& batch) const {
  return FirstOutput(batch, /*student=*/false);
}

Result<ir::Tensor> QatTrainer::FirstOutput(const TrainingBatch& batch, bool student) const {
  QK_ASSIGN_OR_RETURN(NamedAten feeds, Feeds(batch));
  ir::Tensor out;
  const char* what = student ? "QAT validation (student)" : "QAT validation (FP32 teacher)";
  QK_RETURN_IF_ERROR(Guarded(what, [&]() -> Status {
    at::NoGradGuard no_grad;
    AtenRunOptions run;
    const NamedAten params = impl_->ParameterFeeds();
    if (student) run.parameters = &params;
    QK_ASSIGN_OR_RETURN(std::vector<at::Tensor> o,
                        RunAten(student ? *impl_->student : *impl_->teacher, feeds, run));
    QK_RETURN_IF_NOT(!o.empty(), StatusCode::kInvalidArgument, "{}: the model has no output", what);
    QK_ASSIGN_OR_RETURN(out,
                        ToIrTensor(o.front().detach().to(at::kCPU, at::kFloat).contiguous(), what));
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<NamedTensor>> QatTrainer::Parameters() const {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < impl_->names.size(); ++i) {
    QK_ASSIGN_OR_RETURN(
        ir::Tensor t, ToIrTensor(impl_->params[i].detach(), "parameter '" + impl_->names[i] + "'"));
    out.push_back({impl_->names[i], std::move(t)});
  }
  return out;
}

Status QatTrainer::SetParameters(const std::vector<NamedTensor>& values) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < impl_->names.size(); ++i) index[impl_->names[i]] = i;
  for (const NamedTensor& v : values) {
    auto it = index.find(v.name);
    QK_RETURN_IF_NOT(it != index.end(), StatusCode::kInvalidArgument,
                     "'{}' is not a trained parameter", v.name);
    at::Tensor& p = impl_->params[it->second];
    QK_ASSIGN_OR_RETURN(at::Tensor src, WrapTensor(v.tensor, "parameter '" + v.name + "'"));
    QK_RETURN_IF_NOT(src.sizes() == p.sizes() && src.scalar_type() == p.scalar_type(),
                     StatusCode::kInvalidArgument, "parameter '{}' has shape [{}], expected [{}]",
                     v.name, fmt::join(src.sizes(), ","), fmt::join(p.sizes(), ","));
    at::NoGradGuard no_grad;
    p.copy_(src);
  }
  return Status::Ok();
}

Status QatTrainer::SaveCheckpoint(const std::string& path, const CheckpointExtras& extras) const {
  std::vector<data::NpzArray> arrays;
  // Host copies of everything (train/checkpoint_io.h: an .npz that np.load reads); LoadCheckpoint
  // places the state beside the parameters, so checkpoints move between CPU and GPU runs.
  for (size_t i = 0; i < impl_->names.size(); ++i) {
    // A diverged run (NaN/Inf parameters) must not overwrite the last good checkpoint with a
    // file that --resume would refuse: the run fails here and the previous file stays.
    const bool finite = at::isfinite(impl_->params[i].detach()).all().item<bool>();
    QK_RETURN_IF_NOT(
        finite, StatusCode::kInvalidArgument,
        "training diverged at step {}: parameter '{}' holds NaN or Inf; {} is left as it was (a "
        "lower --lr, or --resume from it)",
        impl_->step, impl_->names[i], path);
    QK_ASSIGN_OR_RETURN(ir::Tensor t,
                        ToIrTensor(impl_->params[i].detach().to(at::kCPU), impl_->names[i]));
    arrays.push_back({"param/" + impl_->names[i], std::move(t)});
  }
  for (const NamedTensor& b : extras.best) arrays.push_back({"best/" + b.name, b.tensor});
  for (const auto& [k, v] : extras.values) {
    arrays.push_back(
        {"value/" + k, ir::Tensor::FromVector(ir::DType::kDouble, {}, std::vector<double>{v})});
  }
  arrays.push_back(
      {"step", ir::Tensor::FromVector(ir::DType::kInt64, {}, std::vector<int64_t>{impl_->step})});
  QK_ASSIGN_OR_RETURN(std::vector<data::NpzArray> state,
                      OptimizerStateArrays(*impl_->optimizer, impl_->options.optimizer,
                                           impl_->names, impl_->params));
  for (data::NpzArray& a : state) arrays.push_back(std::move(a));
  return WriteCheckpointFile(path, std::move(arrays));
}

Result<CheckpointExtras> QatTrainer::LoadCheckpoint(const std::string& path) {
  QK_ASSIGN_OR_RETURN(CheckpointFile file, ReadCheckpointFile(path));
  // Everything is read and checked first; the trainer changes only once all of it holds.
  CheckpointExtras extras;
  std::vector<at::Tensor> values(impl_->names.size());
  // ATen's exceptions (out of memory) as a Status naming the file.
  QK_RETURN_IF_ERROR(Guarded(path, [&]() -> Status {
    std::unordered_set<std::string> known;
    for (size_t i = 0; i < impl_->names.size(); ++i) {
      const std::string& name = impl_->names[i];
      known.insert(name);
      QK_RETURN_IF_NOT(file.arrays.count("param/" + name), StatusCode::kInvalidArgument,
                       "{}: checkpoint lacks parameter '{}' (another model or plan?)", path, name);
      QK_ASSIGN_OR_RETURN(values[i],
                          CheckpointTensorLike(file, path, "param/" + name, impl_->params[i]));
      if (file.arrays.count("best/" + name)) {
        QK_RETURN_IF_ERROR(
            CheckpointTensorLike(file, path, "best/" + name, impl_->params[i]).status());
        extras.best.push_back({name, file.arrays.at("best/" + name)});
      }
    }
    for (const auto& [member, t] : file.arrays) {
      for (const char* prefix : {"param/", "best/"}) {
        QK_RETURN_IF_NOT(
            member.rfind(prefix, 0) != 0 || known.count(member.substr(std::string(prefix).size())),
            StatusCode::kInvalidArgument,
            "{}: '{}' is not a trained parameter (another model or plan?)", path, member);
      }
    }
    QK_ASSIGN_OR_RETURN(extras.values, CheckpointValues(file, path));
    return Status::Ok();
  }));
  QK_RETURN_IF_ERROR(RestoreOptimizerState(file, path, impl_->options.optimizer, impl_->names,
                                           impl_->params, impl_->optimizer.get()));
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < values.size(); ++i) impl_->params[i].copy_(values[i]);
  impl_->step = file.step;
  return extras;
}

}  // namespace quantkit::train
