#include "train/checkpoint_io.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <optional>
#include <sstream>
#include <type_traits>
#include <unordered_set>

#include "common/check.h"
#include "runtime/aten_bridge.h"
#include "runtime/aten_guard.h"

namespace quantkit::train {
namespace {

constexpr const char* kKindNames[] = {"sgd", "adamw"};  // by OptimizerKind
const char* KindName(OptimizerKind kind) { return kKindNames[kind == OptimizerKind::kSgd ? 0 : 1]; }

Status NotACheckpoint(const std::string& path, const std::string& why) {
  return MakeStatus(StatusCode::kInvalidArgument, "{}: not a quantkit QAT checkpoint ({})", path,
                    why);
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

data::NpzArray Int64Scalar(std::string name, int64_t value) {
  return {std::move(name),
          ir::Tensor::FromVector(ir::DType::kInt64, {}, std::vector<int64_t>{value})};
}

// The value of an int64 scalar member, or nullopt when it is absent or of another kind.
std::optional<int64_t> Int64Member(const CheckpointFile& file, const std::string& name) {
  auto it = file.arrays.find(name);
  if (it == file.arrays.end() || it->second.dtype() != ir::DType::kInt64 || it->second.numel() != 1)
    return {};
  return *it->second.data_as<int64_t>();
}

// libtorch keys an optimizer's state by the parameter's TensorImpl: its address as text in
// libtorch 1.x (c10::guts::to_string), the address itself in 2.x.
template <typename StateMap>
typename StateMap::key_type StateKey(const at::Tensor& param) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream text;
    text << static_cast<const void*>(param.unsafeGetTensorImpl());
    return text.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}
using StateMap = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;

}  // namespace

Result<CheckpointFile> ReadCheckpointFile(const std::string& path) {
  QK_ASSIGN_OR_RETURN(std::vector<data::NpzArray> arrays, data::ReadNpz(path));
  CheckpointFile file;
  for (data::NpzArray& a : arrays) file.arrays.emplace(std::move(a.name), std::move(a.tensor));
  const std::optional<int64_t> version = Int64Member(file, "format_version");
  if (!version.has_value()) return NotACheckpoint(path, "no format_version member");
  QK_RETURN_IF_NOT(*version == kCheckpointFormatVersion, StatusCode::kInvalidArgument,
                   "{}: QAT checkpoint format {}, this quantkit reads format {}", path, *version,
                   kCheckpointFormatVersion);
  const std::optional<int64_t> step = Int64Member(file, "step");
  if (!step.has_value() || *step < 0)
    return NotACheckpoint(path, "no step count, or a negative one");
  file.step = *step;
  const bool sgd = file.arrays.count("optimizer/sgd") > 0,
             adamw = file.arrays.count("optimizer/adamw") > 0;
  if (sgd == adamw) return NotACheckpoint(path, "no optimizer state, or two");
  file.optimizer = sgd ? OptimizerKind::kSgd : OptimizerKind::kAdamW;
  const std::string state_prefix = fmt::format("optimizer/{}/", KindName(file.optimizer));
  bool has_parameters = false;
  for (const auto& [name, tensor] : file.arrays) {
    has_parameters |= StartsWith(name, "param/");
    const bool known = name == "format_version" || name == "step" || StartsWith(name, "param/") ||
                       StartsWith(name, "best/") || StartsWith(name, "value/") ||
                       StartsWith(name, state_prefix) || name == "optimizer/sgd" ||
                       name == "optimizer/adamw";
    if (!known) return NotACheckpoint(path, fmt::format("unknown member '{}'", name));
  }
  if (!has_parameters) return NotACheckpoint(path, "no parameters");
  return file;
}

Status WriteCheckpointFile(const std::string& path, std::vector<data::NpzArray> arrays) {
  arrays.insert(arrays.begin(), Int64Scalar("format_version", kCheckpointFormatVersion));
  return data::WriteNpz(path, arrays);
}

Result<std::vector<data::NpzArray>> OptimizerStateArrays(const torch::optim::Optimizer& optimizer,
                                                         OptimizerKind kind,
                                                         const std::vector<std::string>& names,
                                                         const std::vector<at::Tensor>& params) {
  const std::string prefix = fmt::format("optimizer/{}/", KindName(kind));
  std::vector<data::NpzArray> arrays{Int64Scalar(fmt::format("optimizer/{}", KindName(kind)), 1)};
  auto add = [&](const std::string& state, const std::string& name, const at::Tensor& t) -> Status {
    QK_ASSIGN_OR_RETURN(ir::Tensor host,
                        runtime::ToIrTensor(t.detach().to(at::kCPU, at::kFloat), name));
    arrays.push_back({prefix + state + "/" + name, std::move(host)});
    return Status::Ok();
  };
  QK_RETURN_IF_ERROR(runtime::Guarded("saving the optimizer state", [&]() -> Status {
    const StateMap& states = optimizer.state();
    for (size_t i = 0; i < params.size(); ++i) {
      auto it = states.find(StateKey<StateMap>(params[i]));
      if (it == states.end())
        continue;  // not updated yet: the optimizer creates it on the first step
      if (kind == OptimizerKind::kSgd) {
        const auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
        if (s.momentum_buffer().defined())
          QK_RETURN_IF_ERROR(add("momentum_buffer", names[i], s.momentum_buffer()));
      } else {
        const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
        QK_RETURN_IF_ERROR(add("exp_avg", names[i], s.exp_avg()));
        QK_RETURN_IF_ERROR(add("exp_avg_sq", names[i], s.exp_avg_sq()));
        arrays.push_back(Int64Scalar(prefix + "step/" + names[i], s.step()));
      }
    }
    return Status::Ok();
  }));
  return arrays;
}

Status RestoreOptimizerState(const CheckpointFile& file, const std::string& path,
                             OptimizerKind kind, const std::vector<std::string>& names,
                             const std::vector<at::Tensor>& params,
                             torch::optim::Optimizer* optimizer) {
  QK_RETURN_IF_NOT(file.optimizer == kind, StatusCode::kInvalidArgument,
                   "{}: the checkpoint holds {} state, this run uses {} (--optimizer)", path,
                   KindName(file.optimizer), KindName(kind));
  const std::string prefix = fmt::format("optimizer/{}/", KindName(kind));
  auto member = [&](const std::string& state, const std::string& name) {
    return prefix + state + "/" + name;
  };
  // Every member names a parameter and a state of this optimizer.
  std::unordered_set<std::string> expected;
  for (const std::string& name : names) {
    for (const char* state : {"momentum_buffer", "exp_avg", "exp_avg_sq", "step"})
      expected.insert(member(state, name));
  }
  for (const auto& [name, tensor] : file.arrays) {
    QK_RETURN_IF_NOT(
        !StartsWith(name, prefix) || expected.count(name), StatusCode::kInvalidArgument,
        "{}: '{}' names no state of a trained parameter (another model or plan?)", path, name);
  }
  return runtime::Guarded(path + ": restoring the optimizer state", [&]() -> Status {
    StateMap restored;
    for (size_t i = 0; i < params.size(); ++i) {
      auto has = [&](const char* state) { return file.arrays.count(member(state, names[i])) > 0; };
      if (kind == OptimizerKind::kSgd) {
        if (!has("momentum_buffer")) continue;
        QK_ASSIGN_OR_RETURN(
            at::Tensor buffer,
            CheckpointTensorLike(file, path, member("momentum_buffer", names[i]), params[i]));
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(buffer);
        restored[StateKey<StateMap>(params[i])] = std::move(s);
        continue;
      }
      const int present = has("exp_avg") + has("exp_avg_sq") + has("step");
      if (present == 0) continue;
      QK_RETURN_IF_NOT(
          present == 3, StatusCode::kInvalidArgument,
          "{}: AdamW state of '{}' is incomplete (exp_avg, exp_avg_sq and step go together)", path,
          names[i]);
      const std::optional<int64_t> step = Int64Member(file, member("step", names[i]));
      // A parameter is updated at most once per optimizer step: a larger count is not a count.
      QK_RETURN_IF_NOT(step.has_value() && *step >= 0 && *step <= file.step,
                       StatusCode::kInvalidArgument,
                       "{}: '{}' is not one int64 in [0, {}] (the checkpoint's step)", path,
                       member("step", names[i]), file.step);
      QK_ASSIGN_OR_RETURN(at::Tensor exp_avg,
                          CheckpointTensorLike(file, path, member("exp_avg", names[i]), params[i]));
      QK_ASSIGN_OR_RETURN(
          at::Tensor exp_avg_sq,
          CheckpointTensorLike(file, path, member("exp_avg_sq", names[i]), params[i]));
      QK_RETURN_IF_NOT((exp_avg_sq >= 0).all().item<bool>(), StatusCode::kInvalidArgument,
                       "{}: '{}' holds negative values (a running mean of squares)", path,
                       member("exp_avg_sq", names[i]));
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->step(*step);
      s->exp_avg(exp_avg);
      s->exp_avg_sq(exp_avg_sq);
      restored[StateKey<StateMap>(params[i])] = std::move(s);
    }
    optimizer->state() = std::move(restored);
    return Status::Ok();
  });
}

Result<at::Tensor> CheckpointTensorLike(const CheckpointFile& file, const std::string& path,
                                        const std::string& name, const at::Tensor& param) {
  const ir::Tensor& t = file.arrays.at(name);
  QK_RETURN_IF_NOT(t.dtype() == ir::DType::kFloat && t.dims() == param.sizes().vec(),
                   StatusCode::kInvalidArgument,
                   "{}: '{}' is {} [{}], expected float [{}] (another model or plan?)", path, name,
                   ir::DTypeName(t.dtype()), fmt::join(t.dims(), ","),
                   fmt::join(param.sizes(), ","));
  QK_ASSIGN_OR_RETURN(at::Tensor a, runtime::CopyToAten(t, name));
  QK_RETURN_IF_NOT(at::isfinite(a).all().item<bool>(), StatusCode::kInvalidArgument,
                   "{}: '{}' holds NaN or Inf", path, name);
  return a.to(param.device());
}

Result<std::map<std::string, double>> CheckpointValues(const CheckpointFile& file,
                                                       const std::string& path) {
  std::map<std::string, double> values;
  for (const auto& [member, t] : file.arrays) {
    if (member.rfind("value/", 0) != 0) continue;
    QK_RETURN_IF_NOT(
        t.dtype() == ir::DType::kDouble && t.numel() == 1 && std::isfinite(*t.data_as<double>()),
        StatusCode::kInvalidArgument, "{}: '{}' is not one finite float64", path, member);
    values[member.substr(6)] = *t.data_as<double>();
  }
  return values;
}

Status CheckCheckpointFile(const std::string& path) { return ReadCheckpointFile(path).status(); }

Result<std::map<std::string, double>> ReadCheckpointValues(const std::string& path) {
  QK_ASSIGN_OR_RETURN(CheckpointFile file, ReadCheckpointFile(path));
  return CheckpointValues(file, path);
}

}  // namespace quantkit::train
