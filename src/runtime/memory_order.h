// Whether the Run on this thread executes convolutions channels-last (runtime-internal).
//
// InterpreterOptions::channels_last builds the kernels for it; each top-level Run then decides:
// channels-last only when nothing observes the run's tensors. Observers need NCHW-contiguous
// views, and copying every observed tensor back costs more than channels-last gains at
// calibration's one sample per run (mobilenet_v2 calibrate max: ~1.3-1.9 -> ~2.7-3.0 CPU s), so
// observed runs (calibrate, diagnose, analyze) keep the NCHW path and their statistics stay
// byte-identical to it. A thread-local, because Run() may be called concurrently from threads.
#pragma once

namespace quantkit::runtime {

bool ChannelsLastRun();

// Sets ChannelsLastRun() for this thread until destroyed (restores the previous value).
class ChannelsLastRunScope {
 public:
  explicit ChannelsLastRunScope(bool on);
  ~ChannelsLastRunScope();
  ChannelsLastRunScope(const ChannelsLastRunScope&) = delete;
  ChannelsLastRunScope& operator=(const ChannelsLastRunScope&) = delete;

 private:
  bool previous_;
};

}  // namespace quantkit::runtime
