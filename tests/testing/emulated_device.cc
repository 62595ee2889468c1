#include "testing/emulated_device.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace quantkit::testing {
namespace {

constexpr c10::DeviceType kEmulated = c10::DeviceType::PrivateUse1;
std::atomic<int64_t> g_mixed_calls{0};

// The DataPtr context of emulated memory: the host storage it lives in (kept alive by it).
struct HostStorage {
  c10::Storage storage;
};
void DeleteHostStorage(void* context) { delete static_cast<HostStorage*>(context); }

bool IsEmulated(const at::Tensor& t) { return t.defined() && t.device().type() == kEmulated; }

// The emulated tensor over `host`'s memory (same storage bytes, sizes, strides and offset). A
// view result of an operator is built as ATen builds views (TensorImpl::VIEW with its base's
// dispatch keys), so that autograd's view bookkeeping accepts it in and out of inference mode.
at::Tensor ToEmulated(const at::Tensor& host, const at::Tensor* view_of = nullptr) {
  const c10::Storage& hs = host.storage();
  auto context = std::make_unique<HostStorage>(HostStorage{hs});
  c10::DataPtr ptr(hs.data_ptr().get(), context.release(), &DeleteHostStorage,
                   c10::Device(kEmulated, 0));
  c10::Storage storage(c10::Storage::use_byte_size_t(), hs.nbytes(), std::move(ptr),
                       /*allocator=*/nullptr,
                       /*resizable=*/false);
  auto impl = view_of != nullptr
                  ? c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, std::move(storage),
                                                         view_of->key_set(), host.dtype())
                  : c10::make_intrusive<c10::TensorImpl>(
                        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                        host.dtype());
  impl->set_sizes_and_strides(host.sizes(), host.strides());
  impl->set_storage_offset(host.storage_offset());
  return at::Tensor(std::move(impl));
}

// The host tensor that shares an emulated tensor's memory, storage included (so ATen's CPU
// kernels see views of one buffer as aliases, as they are).
at::Tensor ToHost(const at::Tensor& t) {
  const c10::DataPtr& ptr = t.storage().data_ptr();
  TORCH_CHECK(ptr.get_deleter() == &DeleteHostStorage,
              "emulated device: a privateuseone tensor that the emulation did not create");
  const c10::Storage& hs = static_cast<HostStorage*>(ptr.get_context())->storage;
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      c10::Storage(hs), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides());
  impl->set_storage_offset(t.storage_offset());
  return at::Tensor(std::move(impl));
}

// Operators that move data between devices: they take a host tensor and a device tensor by design.
bool IsCopy(const std::string& name) {
  return name == "aten::copy_" || name == "aten::_copy_from" ||
         name == "aten::_copy_from_and_resize" || name == "aten::_to_copy";
}

struct Unwrapped {
  std::vector<at::Tensor> emulated;  // emulated arguments, in order
  std::vector<at::Tensor> host;      // their host aliases, same order
  std::vector<at::Tensor>
      inputs;         // host arguments as given (returned unchanged when an op returns one)
  std::string mixed;  // the first host argument of more than 0 dimensions, if any
  bool device_argument = false;  // the op names a device (factory functions, _to_copy)
  bool to_emulated = false;      // ... and it is this one
};

at::Tensor Unwrap(const at::Tensor& t, const std::string& arg, Unwrapped& u) {
  if (IsEmulated(t)) {
    u.emulated.push_back(t);
    u.host.push_back(ToHost(t));
    return u.host.back();
  }
  if (t.defined()) {
    u.inputs.push_back(t);
    if (t.dim() > 0 && u.mixed.empty()) u.mixed = arg;
  }
  return t;
}

c10::IValue UnwrapValue(const c10::IValue& v, const std::string& arg, Unwrapped& u) {
  if (v.isTensor()) return Unwrap(v.toTensor(), arg, u);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(Unwrap(t, arg, u));
    return out;
  }
  if (v.isList()) {  // Tensor?[] (index, index_put_)
    const c10::List<c10::IValue> list = v.toList();
    bool tensors = false;
    for (const c10::IValue& e : list) tensors |= e.isTensor();
    if (!tensors) return v;
    c10::List<c10::optional<at::Tensor>> out;
    for (const c10::IValue& e : list) {
      out.push_back(e.isTensor() ? c10::optional<at::Tensor>(Unwrap(e.toTensor(), arg, u))
                                 : c10::nullopt);
    }
    return out;
  }
  if (v.isDevice()) {
    u.device_argument = true;
    if (v.toDevice().type() == kEmulated) {
      u.to_emulated = true;
      return c10::Device(c10::kCPU);
    }
  }
  return v;
}

// A result of the host call, back on the caller's side of the device boundary (`view`: the
// schema declares it an alias of an argument).
at::Tensor Rewrap(const at::Tensor& r, const Unwrapped& u, bool emulated_result,
                  bool view = false) {
  if (!r.defined()) return r;
  for (size_t i = 0; i < u.host.size(); ++i) {
    if (r.unsafeGetTensorImpl() == u.host[i].unsafeGetTensorImpl())
      return u.emulated[i];  // in place / out=
  }
  for (const at::Tensor& t : u.inputs) {
    if (r.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return t;
  }
  if (!emulated_result) return r;
  return view && !u.emulated.empty() ? ToEmulated(r, &u.emulated.front()) : ToEmulated(r);
}

// An emulated argument written in place whose host alias ATen resized or re-pointed
// (resize_, out= arguments): the emulated tensor follows.
void SyncWritten(Unwrapped& u) {
  for (size_t i = 0; i < u.emulated.size(); ++i) {
    at::Tensor& e = u.emulated[i];
    const at::Tensor& h = u.host[i];
    const bool same_buffer = e.storage().data_ptr().get() == h.storage().data_ptr().get() &&
                             e.storage().nbytes() == h.storage().nbytes();
    if (same_buffer && e.sizes() == h.sizes() && e.strides() == h.strides() &&
        e.storage_offset() == h.storage_offset()) {
      continue;
    }
    at::Tensor fresh = ToEmulated(h);
    e.unsafeGetTensorImpl()->set_storage_keep_dtype(fresh.storage());
    e.unsafeGetTensorImpl()->set_sizes_and_strides(h.sizes(), h.strides());
    e.unsafeGetTensorImpl()->set_storage_offset(h.storage_offset());
  }
}

void EmulatedFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const std::string name = schema.name();
  const size_t num_args = schema.arguments().size();
  const size_t first = stack->size() - num_args;
  Unwrapped u;
  for (size_t i = 0; i < num_args; ++i) {
    (*stack)[first + i] = UnwrapValue((*stack)[first + i], schema.arguments()[i].name(), u);
  }
  if (!u.mixed.empty() && !IsCopy(name)) {
    ++g_mixed_calls;
    TORCH_CHECK(false,
                "Expected all tensors to be on the same device, but found at least two devices, ",
                "privateuseone:0 and cpu! (when checking argument '", u.mixed, "' of ", name,
                "; emulated device, tests/testing/emulated_device.h)");
  }
  if (name == "aten::_copy_from" || name == "aten::_copy_from_and_resize") {
    // copy_ between a host and a non-CPU device redispatches here (ATen has no CPU kernel for
    // these two): do the copy on the host side, return the destination.
    const at::Tensor src = (*stack)[first].toTensor();
    at::Tensor dst = (*stack)[first + 1].toTensor();
    if (name == "aten::_copy_from_and_resize") dst.resize_(src.sizes());
    dst.copy_(src);
    SyncWritten(u);
    torch::jit::drop(*stack, num_args);
    stack->emplace_back(Rewrap(dst, u, false));
    return;
  }
  if (name == "aten::convolution_overrideable") {
    // at::convolution sends devices other than the CPU and CUDA here: the host's convolution,
    // which takes the same arguments.
    static const c10::OperatorHandle conv =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
    conv.callBoxed(stack);
  } else {
    op.callBoxed(stack);
  }
  SyncWritten(u);
  // Results live where the op put them: on the named device, else beside the emulated inputs.
  const bool emulated_result = u.device_argument ? u.to_emulated : !u.emulated.empty();
  const size_t num_returns = schema.returns().size();
  for (size_t i = stack->size() - num_returns, r = 0; i < stack->size(); ++i, ++r) {
    c10::IValue& v = (*stack)[i];
    const c10::AliasInfo* alias = schema.returns()[r].alias_info();
    const bool view = alias != nullptr && !alias->isWrite();
    if (v.isTensor()) {
      v = Rewrap(v.toTensor(), u, emulated_result, view);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList())
        out.push_back(Rewrap(t, u, emulated_result, view));
      v = out;
    }
  }
}

void Register() {
  if (!c10::impl::hasDeviceGuardImpl(kEmulated)) {
    static c10::impl::DeviceGuardImplRegistrar guard(
        kEmulated, new c10::impl::NoOpDeviceGuardImpl<kEmulated>());
  }
  static torch::Library fallback(torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1, __FILE__,
                                 __LINE__);
  fallback.fallback(torch::CppFunction::makeFromBoxedFunction<&EmulatedFallback>());
  // Operators with a default (CompositeExplicitAutograd) kernel take it before a backend
  // fallback: convolution_overrideable's default only throws "not implemented".
  static torch::Library aten(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                             __LINE__);
  aten.impl("convolution_overrideable",
            torch::CppFunction::makeFromBoxedFunction<&EmulatedFallback>());
}

}  // namespace

runtime::Device EmulatedDevice() {
  static std::once_flag once;
  std::call_once(once, Register);
  runtime::Device d;
  d.kind = runtime::Device::Kind::kPrivateUse1;
  return d;
}

int64_t EmulatedDeviceMixedCalls() { return g_mixed_calls.load(); }

}  // namespace quantkit::testing
