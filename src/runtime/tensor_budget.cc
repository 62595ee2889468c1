#include "runtime/tensor_budget.h"

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "common/check.h"

namespace quantkit::runtime {
namespace {

std::atomic<int64_t> explicit_limit_bytes{0};  // 0: the rule (or the environment)
thread_local int64_t active_budget = 0;        // 0: no run on this thread, nothing checked

std::string Bytes(int64_t n) {
  return n >= (int64_t{1} << 20) ? fmt::format("{:.1f} MiB", static_cast<double>(n) / (1 << 20))
                                 : fmt::format("{} bytes", n);
}

// ATen's CPU allocator with the run's budget in front. The wrapped allocator's DataPtr (and
// deleter) is returned unchanged, so tensors allocated before or after keep working.
class BudgetAllocator final : public c10::Allocator {
 public:
  explicit BudgetAllocator(c10::Allocator* base) : base_(base) {}

#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) override { return Checked(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    base_->copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t n) const override { return Checked(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }

 private:
  c10::DataPtr Checked(size_t n) const {
    const int64_t budget = active_budget;
    if (budget > 0 && n > static_cast<uint64_t>(budget)) {
      throw TensorBudgetExceeded(fmt::format(
          "a tensor of {} exceeds the per-tensor budget of {} (max of {} and {} x the model's constants and "
          "inputs; raise it with --max-tensor-mb or QUANTKIT_MAX_TENSOR_MB)",
          Bytes(static_cast<int64_t>(n)), Bytes(budget), Bytes(kTensorBudgetFloorBytes),
          kTensorBudgetFactor));
    }
    return base_->allocate(n);
  }
  c10::Allocator* base_;
};

void InstallBudgetAllocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    static BudgetAllocator allocator(c10::GetAllocator(c10::DeviceType::CPU));
    c10::SetAllocator(c10::DeviceType::CPU, &allocator, /*priority=*/UINT8_MAX);
  });
}

Result<int64_t> LimitFromEnvironment() {
  const char* text = std::getenv("QUANTKIT_MAX_TENSOR_MB");
  if (text == nullptr || *text == '\0') return int64_t{0};
  char* end = nullptr;
  const long long mb = std::strtoll(text, &end, 10);
  QK_RETURN_IF_NOT(*end == '\0' && mb >= 1 && mb <= kMaxTensorBudgetMb,
                   StatusCode::kInvalidArgument,
                   "QUANTKIT_MAX_TENSOR_MB='{}' is not a whole number of MiB in [1, {}]", text,
                   kMaxTensorBudgetMb);
  return static_cast<int64_t>(mb) << 20;
}

}  // namespace

Status SetMaxTensorMb(int64_t mb) {
  QK_RETURN_IF_NOT(mb >= 0 && mb <= kMaxTensorBudgetMb, StatusCode::kInvalidArgument,
                   "--max-tensor-mb {} is not in [1, {}]", mb, kMaxTensorBudgetMb);
  explicit_limit_bytes.store(mb << 20);
  return Status::Ok();
}

Result<int64_t> TensorBudgetBytes(int64_t model_and_input_bytes) {
  InstallBudgetAllocator();
  static const Result<int64_t> from_environment = LimitFromEnvironment();
  if (const int64_t set = explicit_limit_bytes.load(); set > 0) return set;
  QK_RETURN_IF_ERROR(from_environment.status());
  if (*from_environment > 0) return *from_environment;
  const int64_t scaled = model_and_input_bytes > INT64_MAX / kTensorBudgetFactor
                             ? INT64_MAX
                             : model_and_input_bytes * kTensorBudgetFactor;
  return std::max(kTensorBudgetFloorBytes, scaled);
}

TensorBudgetScope::TensorBudgetScope(int64_t budget_bytes) : previous_(active_budget) {
  if (previous_ == 0) active_budget = budget_bytes;
}

TensorBudgetScope::~TensorBudgetScope() { active_budget = previous_; }

}  // namespace quantkit::runtime
