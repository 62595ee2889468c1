#include "distributed/communicator.h"

#include <torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "common/check.h"

namespace quantkit::distributed {
namespace {

// Parses an environment variable as an int in [lo, hi]; `name` is quoted in the error.
Result<int> EnvInt(const GetEnvFn& getenv_fn, const char* name, int lo, int hi, int fallback) {
  const char* v = getenv_fn(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  QK_RETURN_IF_NOT(
      errno == 0 && end != v && *end == '\0' && x >= lo && x <= hi, StatusCode::kInvalidArgument,
      "environment variable {}='{}' is not a whole number in [{}, {}]", name, v, lo, hi);
  return static_cast<int>(x);
}

std::string EnvString(const GetEnvFn& getenv_fn, const char* name) {
  const char* v = getenv_fn(name);
  return v ? std::string(v) : std::string();
}

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  Status AllReduceSum(std::vector<int64_t>*, const std::string&) override { return Status::Ok(); }
  Result<std::vector<std::string>> AllGather(const std::string& bytes,
                                             const std::string&) override {
    return std::vector<std::string>{bytes};
  }
  Result<std::vector<std::string>> GatherToRoot(const std::string& bytes,
                                                const std::string&) override {
    return std::vector<std::string>{bytes};
  }
  Result<std::string> Broadcast(const std::string& bytes, const std::string&) override {
    return bytes;
  }
  Status Barrier(const std::string&) override { return Status::Ok(); }
};

// Tensors over caller memory (no copy); c10d's collectives take them by reference.
at::Tensor BytesTensor(std::string* bytes) {
  return at::from_blob(bytes->data(), {static_cast<int64_t>(bytes->size())}, at::kByte);
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(DistributedEnv env, c10::intrusive_ptr<c10d::Store> store,
                   c10::intrusive_ptr<c10d::ProcessGroupGloo> group,
                   std::chrono::milliseconds timeout)
      : env_(std::move(env)),
        store_(std::move(store)),
        group_(std::move(group)),
        timeout_(timeout) {}

  ~GlooCommunicator() override {
    // Ranks leave together: rank 0 may host the store the others still read, so nobody tears
    // down its side while another rank is mid-collective. Best effort; errors were reported.
    if (healthy_) Barrier("shutdown").IgnoreError();
  }

  int rank() const override { return env_.rank; }
  int world_size() const override { return env_.world_size; }
  int local_rank() const override { return env_.local_rank; }

  Status AllReduceSum(std::vector<int64_t>* values, const std::string& what) override {
    return Collective(what, [&] {
      at::Tensor t =
          at::from_blob(values->data(), {static_cast<int64_t>(values->size())}, at::kLong);
      std::vector<at::Tensor> ts{t};
      c10d::AllreduceOptions o;
      o.reduceOp = c10d::ReduceOp::SUM;
      o.timeout = timeout_;
      group_->allreduce(ts, o)->wait();
    });
  }

  Result<std::vector<std::string>> AllGather(const std::string& bytes,
                                             const std::string& what) override {
    QK_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, Sizes(bytes.size(), what));
    const int64_t max_size = *std::max_element(sizes.begin(), sizes.end());
    std::vector<std::string> out(sizes.size());
    if (max_size == 0) return out;
    std::string mine = Padded(bytes, max_size);
    for (std::string& s : out) s.assign(static_cast<size_t>(max_size), '\0');
    QK_RETURN_IF_ERROR(Collective(what, [&] {
      std::vector<at::Tensor> in{BytesTensor(&mine)};
      std::vector<std::vector<at::Tensor>> outs(1);
      for (std::string& s : out) outs[0].push_back(BytesTensor(&s));
      c10d::AllgatherOptions o;
      o.timeout = timeout_;
      group_->allgather(outs, in, o)->wait();
    }));
    for (size_t r = 0; r < out.size(); ++r) out[r].resize(static_cast<size_t>(sizes[r]));
    return out;
  }

  Result<std::vector<std::string>> GatherToRoot(const std::string& bytes,
                                                const std::string& what) override {
    QK_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, Sizes(bytes.size(), what));
    const int64_t max_size = *std::max_element(sizes.begin(), sizes.end());
    std::vector<std::string> out(is_root() ? sizes.size() : 0);
    if (max_size == 0) return out;
    std::string mine = Padded(bytes, max_size);
    for (std::string& s : out) s.assign(static_cast<size_t>(max_size), '\0');
    QK_RETURN_IF_ERROR(Collective(what, [&] {
      std::vector<at::Tensor> in{BytesTensor(&mine)};
      std::vector<std::vector<at::Tensor>> outs;
      if (is_root()) {
        outs.emplace_back();
        for (std::string& s : out) outs[0].push_back(BytesTensor(&s));
      }
      c10d::GatherOptions o;
      o.rootRank = 0;
      o.timeout = timeout_;
      group_->gather(outs, in, o)->wait();
    }));
    for (size_t r = 0; r < out.size(); ++r) out[r].resize(static_cast<size_t>(sizes[r]));
    return out;
  }

  Result<std::string> Broadcast(const std::string& bytes, const std::string& what) override {
    std::vector<int64_t> size{is_root() ? static_cast<int64_t>(bytes.size()) : 0};
    QK_RETURN_IF_ERROR(AllReduceSum(&size, what));  // only rank 0 contributes: its size
    std::string out = is_root() ? bytes : std::string(static_cast<size_t>(size[0]), '\0');
    if (size[0] == 0) return out;
    QK_RETURN_IF_ERROR(Collective(what, [&] {
      std::vector<at::Tensor> ts{BytesTensor(&out)};
      c10d::BroadcastOptions o;
      o.rootRank = 0;
      o.timeout = timeout_;
      group_->broadcast(ts, o)->wait();
    }));
    return out;
  }

  Status Barrier(const std::string& what) override {
    // A one-element all-reduce rather than c10d's barrier: it honours the same timeout and
    // reports a missing rank the same way as every other step.
    std::vector<int64_t> one{1};
    return AllReduceSum(&one, what);
  }

 private:
  std::string ArrivalKey(int64_t step, int rank) const {
    return fmt::format("arrived/{}/{}", step, rank);
  }

  // Runs one collective: records this rank's arrival, then turns any exception into a Status
  // naming the ranks that never reached this step.
  template <typename Fn>
  Status Collective(const std::string& what, Fn&& fn) {
    // After a lost rank the group is unusable (Gloo pairs are broken): fail fast, not after a
    // timeout.
    if (!healthy_) {
      return MakeStatus(StatusCode::kIoError,
                        "rank {} of {}: {}: an earlier step lost the other ranks", env_.rank,
                        env_.world_size, what);
    }
    const int64_t step = ++step_;
    try {
      store_->set(ArrivalKey(step, env_.rank), std::vector<uint8_t>{1});
      fn();
      return Status::Ok();
    } catch (const std::exception& e) {
      healthy_ = false;
      return Failure(step, what, e.what());
    }
  }

  Status Failure(int64_t step, const std::string& what, const std::string& cause) {
    std::string first_line = cause.substr(0, cause.find('\n'));
    std::vector<int> missing;
    try {
      for (int r = 0; r < env_.world_size; ++r) {
        if (!store_->check({ArrivalKey(step, r)})) missing.push_back(r);
      }
    } catch (const std::exception&) {
      // The store lives on rank 0 (or torchrun's agent): when it is gone, so is that host.
      return MakeStatus(StatusCode::kIoError,
                        "rank {} of {}: lost contact with the other ranks during {} (the store at "
                        "{}:{} is gone: rank 0 or the launcher exited): {}",
                        env_.rank, env_.world_size, what, env_.master_addr, env_.master_port,
                        first_line);
    }
    if (!missing.empty()) {
      return MakeStatus(
          StatusCode::kIoError,
          "rank {} of {}: rank {} never reached {} (killed, crashed, out of memory, or "
          "slower than --dist-timeout {} s): {}",
          env_.rank, env_.world_size, fmt::join(missing, ", "), what, timeout_.count() / 1000,
          first_line);
    }
    return MakeStatus(StatusCode::kIoError, "rank {} of {}: {} failed: {}", env_.rank,
                      env_.world_size, what, first_line);
  }

  Result<std::vector<int64_t>> Sizes(size_t mine, const std::string& what) {
    std::vector<int64_t> sizes(static_cast<size_t>(env_.world_size), 0);
    sizes[static_cast<size_t>(env_.rank)] = static_cast<int64_t>(mine);
    QK_RETURN_IF_ERROR(AllReduceSum(&sizes, what));
    return sizes;
  }

  static std::string Padded(const std::string& bytes, int64_t size) {
    std::string s = bytes;
    s.resize(static_cast<size_t>(size), '\0');
    return s;
  }

  DistributedEnv env_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::chrono::milliseconds timeout_;
  int64_t step_ = 0;
  bool healthy_ = true;
};

// Status on the wire for Agree: one code byte, then the message.
std::string EncodeStatus(const Status& s) {
  return std::string(1, static_cast<char>(s.code())) + (s.ok() ? std::string() : s.message());
}

}  // namespace

Result<std::optional<DistributedEnv>> ReadDistributedEnv(const GetEnvFn& getenv_fn) {
  const bool has_rank = getenv_fn("RANK") != nullptr,
             has_world = getenv_fn("WORLD_SIZE") != nullptr;
  if (!has_rank && !has_world) return std::optional<DistributedEnv>();
  QK_RETURN_IF_NOT(
      has_rank && has_world, StatusCode::kInvalidArgument,
      "distributed launch: {} is set but {} is not (torchrun, srun torchrun and PyTorchJob "
      "set both)",
      has_rank ? "RANK" : "WORLD_SIZE", has_rank ? "WORLD_SIZE" : "RANK");
  DistributedEnv env;
  QK_ASSIGN_OR_RETURN(env.world_size, EnvInt(getenv_fn, "WORLD_SIZE", 1, 1 << 20, 1));
  QK_ASSIGN_OR_RETURN(env.rank, EnvInt(getenv_fn, "RANK", 0, env.world_size - 1, 0));
  QK_ASSIGN_OR_RETURN(env.local_world_size,
                      EnvInt(getenv_fn, "LOCAL_WORLD_SIZE", 1, env.world_size, 1));
  QK_ASSIGN_OR_RETURN(env.local_rank, EnvInt(getenv_fn, "LOCAL_RANK", 0, env.world_size - 1, 0));
  if (env.world_size > 1) {
    env.master_addr = EnvString(getenv_fn, "MASTER_ADDR");
    QK_RETURN_IF_NOT(!env.master_addr.empty(), StatusCode::kInvalidArgument,
                     "distributed launch (WORLD_SIZE={}): MASTER_ADDR is not set", env.world_size);
    QK_RETURN_IF_NOT(getenv_fn("MASTER_PORT") != nullptr, StatusCode::kInvalidArgument,
                     "distributed launch (WORLD_SIZE={}): MASTER_PORT is not set", env.world_size);
    QK_ASSIGN_OR_RETURN(env.master_port, EnvInt(getenv_fn, "MASTER_PORT", 1, 65535, 0));
  }
  env.agent_store = EnvString(getenv_fn, "TORCHELASTIC_USE_AGENT_STORE") == "True";
  env.run_id = EnvString(getenv_fn, "TORCHELASTIC_RUN_ID") + "." +
               EnvString(getenv_fn, "TORCHELASTIC_RESTART_COUNT");
  return std::optional<DistributedEnv>(env);
}

Result<std::optional<DistributedEnv>> ReadDistributedEnv() {
  return ReadDistributedEnv([](const char* name) -> const char* { return std::getenv(name); });
}

Result<runtime::Device> ParseDeviceForRank(const std::string& text,
                                           const std::optional<DistributedEnv>& env) {
  QK_ASSIGN_OR_RETURN(runtime::Device device, runtime::ParseDevice(text));
  if (env.has_value() && text == "cuda") device.index = env->local_rank;
  return device;
}

Status Communicator::Agree(const Status& local, const std::string& step) {
  QK_ASSIGN_OR_RETURN(std::vector<std::string> all, AllGather(EncodeStatus(local), step));
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty() || all[r][0] == static_cast<char>(StatusCode::kOk)) continue;
    const auto code = static_cast<StatusCode>(static_cast<unsigned char>(all[r][0]));
    if (static_cast<int>(r) == rank()) {  // this rank's own error, its code kept
      return world_size() == 1
                 ? local
                 : MakeStatus(code, "rank {} of {}: {}", r, world_size(), local.message());
    }
    return MakeStatus(code, "rank {} of {} failed: {}", r, world_size(), all[r].substr(1));
  }
  return Status::Ok();
}

std::unique_ptr<Communicator> SingleProcessCommunicator() {
  return std::make_unique<SingleProcess>();
}

Result<std::unique_ptr<Communicator>> Connect(const DistributedEnv& env,
                                              const CommunicatorOptions& options) {
  if (env.world_size == 1) return SingleProcessCommunicator();
  // A peer that dies mid-job closes its sockets; Gloo's next write to one raises SIGPIPE, whose
  // default action kills this rank without a word. Ignored, the write fails with EPIPE and the
  // collective reports which rank never arrived (Python, and so torch.distributed, ignores it too).
  std::signal(SIGPIPE, SIG_IGN);
#if TORCH_VERSION_MAJOR < 2
  // torchrun >= 2.x shares its agent's TCPStore with the workers; that store speaks a newer wire
  // protocol (it opens with a VALIDATE query) than libtorch 1.x's client, which would fail later
  // with "Broken pipe". With the opt-out, torchrun's rank 0 hosts the store, as torch 1.x did.
  QK_RETURN_IF_NOT(
      !env.agent_store, StatusCode::kUnsupported,
      "rank {} of {}: torchrun shares its agent's TCPStore (TORCHELASTIC_USE_AGENT_STORE=True), "
      "which this quantkit (built on libtorch {}.{}) cannot speak to: launch with "
      "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun ... (docs/distributed.md)",
      env.rank, env.world_size, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR);
#endif
  // Keys of each Connect() in a process get their own namespace in the (possibly shared,
  // long-lived: torchrun's agent) store; every rank counts Connect() calls alike.
  static std::atomic<int> instances{0};
  const std::string prefix = fmt::format("quantkit/{}/{}", env.run_id, instances++);
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(options.timeout).count();
  c10::intrusive_ptr<c10d::Store> store;
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.master_port);
    o.isServer = env.rank == 0 && !env.agent_store;
    o.numWorkers = static_cast<size_t>(env.world_size);
    o.waitWorkers = false;  // the process group's rendezvous below waits, and names who is missing
    o.timeout = options.timeout;
    store = c10::make_intrusive<c10d::PrefixStore>(
        prefix, c10::make_intrusive<c10d::TCPStore>(env.master_addr, o));
    store->set(fmt::format("joined/{}", env.rank), std::vector<uint8_t>{1});
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return MakeStatus(StatusCode::kIoError,
                      "rank {} of {}: cannot {} the rendezvous store at {}:{} within {} s (check "
                      "MASTER_ADDR/MASTER_PORT and that rank 0 or torchrun runs): {}",
                      env.rank, env.world_size,
                      env.rank == 0 && !env.agent_store ? "open" : "reach", env.master_addr,
                      env.master_port, seconds, what.substr(0, what.find('\n')));
  }
  try {
    auto gloo = c10d::ProcessGroupGloo::Options::create(options.timeout);
    const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
    gloo->devices.push_back(iface && *iface
                                ? c10d::ProcessGroupGloo::createDeviceForInterface(iface)
                                : c10d::ProcessGroupGloo::createDefaultDevice());
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size, gloo);
    return std::unique_ptr<Communicator>(
        std::make_unique<GlooCommunicator>(env, store, std::move(group), options.timeout));
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::vector<int> missing;
    try {
      for (int r = 0; r < env.world_size; ++r) {
        if (!store->check({fmt::format("joined/{}", r)})) missing.push_back(r);
      }
    } catch (const std::exception&) {
      missing.clear();
    }
    const std::string who = missing.empty() ? std::string("the other ranks")
                                            : fmt::format("rank {}", fmt::join(missing, ", "));
    return MakeStatus(StatusCode::kIoError,
                      "rank {} of {}: rendezvous at {}:{} did not complete within {} s: {} never "
                      "joined (started with a different WORLD_SIZE, or not started?): {}",
                      env.rank, env.world_size, env.master_addr, env.master_port, seconds, who,
                      what.substr(0, what.find('\n')));
  }
}

bool WritesLaunchOutputs() {
  Result<std::optional<DistributedEnv>> env = ReadDistributedEnv();
  return !env.ok() || !env->has_value() || (*env)->rank == 0;
}

}  // namespace quantkit::distributed
