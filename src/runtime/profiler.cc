#include "runtime/profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <utility>

#include "common/check.h"

namespace quantkit::runtime {
namespace {

namespace prof = torch::profiler::impl;

prof::ProfilerConfig Config() {
  // Host op timings only: input shapes, memory, stacks and FLOPs make the trace larger and slower.
  return prof::ProfilerConfig(prof::ProfilerState::KINETO);
}

// KinetoEvent's clock: microseconds in torch 1.x, nanoseconds since 2.1 (startUs/durationUs gone).
template <typename E>
auto StartUs(const E& e, int) -> decltype(e.startNs(), double()) {
  return static_cast<double>(e.startNs()) / 1000.0;
}
template <typename E>
double StartUs(const E& e, long) {
  return static_cast<double>(e.startUs());
}
template <typename E>
auto DurationUs(const E& e, int) -> decltype(e.durationNs(), double()) {
  return static_cast<double>(e.durationNs()) / 1000.0;
}
template <typename E>
double DurationUs(const E& e, long) {
  return static_cast<double>(e.durationUs());
}

// A libtorch built without libkineto (Debian's 1.13) records the events but cannot save a trace:
// the same Chrome trace format, written from the event list (categories as Kineto names them).
Status WriteTrace(const torch::autograd::profiler::ProfilerResult& result,
                  const std::string& path) {
  nlohmann::json events = nlohmann::json::array();
  for (const torch::autograd::profiler::KinetoEvent& e : result.events()) {
    const bool device = e.deviceType() != c10::DeviceType::CPU;
    const bool user = e.scope() == static_cast<uint8_t>(at::RecordScope::USER_SCOPE);
    events.push_back({{"name", e.name()},
                      {"cat", device ? "kernel"
                              : user ? "user_annotation"
                                     : "cpu_op"},
                      {"ph", "X"},
                      {"ts", StartUs(e, 0)},
                      {"dur", DurationUs(e, 0)},
                      {"pid", device ? 1 : 0},
                      {"tid", e.startThreadId()}});
  }
  std::ofstream out(path, std::ios::trunc);
  out << nlohmann::json{{"traceEvents", std::move(events)}}.dump() << "\n";
  out.close();
  QK_RETURN_IF_NOT(out.good(), StatusCode::kIoError, "{}: writing the profile failed", path);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Profile>> Profile::Start(const std::string& path, bool cuda) {
  QK_RETURN_IF_NOT(!path.empty(), StatusCode::kInvalidArgument, "--profile: empty path");
  {
    std::ofstream probe(path, std::ios::trunc);
    QK_RETURN_IF_NOT(probe.good(), StatusCode::kInvalidArgument,
                     "{}: cannot write the profile there", path);
  }
  QK_RETURN_IF_NOT(!prof::profilerEnabled(), StatusCode::kUnsupported,
                   "{}: another profile is already recording in this process", path);
  std::set<prof::ActivityType> activities = {prof::ActivityType::CPU};
  if (cuda) activities.insert(prof::ActivityType::CUDA);
  try {
    torch::autograd::profiler::prepareProfiler(Config(), activities);
    torch::autograd::profiler::enableProfiler(Config(), activities);
  } catch (const std::exception& e) {
    std::remove(path.c_str());
    return Status(StatusCode::kUnsupported,
                  fmt::format("{}: this libtorch cannot profile: {}", path, e.what()));
  }
  return std::unique_ptr<Profile>(new Profile(path));
}

Status Profile::Finish() {
  QK_RETURN_IF_NOT(recording_, StatusCode::kInternal, "{}: the profile was already written", path_);
  recording_ = false;
  try {
    std::unique_ptr<torch::autograd::profiler::ProfilerResult> result =
        torch::autograd::profiler::disableProfiler();
    QK_RETURN_IF_NOT(result != nullptr, StatusCode::kInternal,
                     "{}: the profiler returned no result", path_);
    try {
      result->save(path_);  // Kineto's own trace: GPU kernels with their launches linked
    } catch (const c10::Error&) {
      return WriteTrace(*result, path_);
    }
  } catch (const std::exception& e) {
    return Status(StatusCode::kIoError,
                  fmt::format("{}: writing the profile failed: {}", path_, e.what()));
  }
  return Status::Ok();
}

Profile::~Profile() {
  if (!recording_) return;
  try {
    torch::autograd::profiler::disableProfiler();
  } catch (
      const std::exception&) {  // a destructor reports nothing; the trace is simply not written
  }
}

}  // namespace quantkit::runtime
