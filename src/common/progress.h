// A progress bar for long work: on a terminal, one line redrawn at most 10 times a second with
// count, rate and ETA; when stderr is not a terminal (pipes, CI logs) it prints nothing.
// Finish() ends the line; the caller prints its own summary.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace quantkit {

class Progress {
 public:
  // total <= 0: unknown (no bar, no ETA). `unit` names what is counted ("samples").
  Progress(std::string label, int64_t total, std::string unit);
  ~Progress();
  void Advance(int64_t n);
  void Finish();
  double ElapsedSeconds() const;
  // Forces drawing (tests) or silence regardless of the terminal.
  void set_enabled(bool enabled) { enabled_ = enabled; }
  // Text drawn after the rate and ETA (e.g. the current training loss).
  void set_note(std::string note) { note_ = std::move(note); }

 private:
  void Draw(bool final);

  std::string label_;
  int64_t total_;
  std::string unit_;
  std::string note_;
  int64_t done_ = 0;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// Peak resident set size of this process in bytes (getrusage).
int64_t PeakRssBytes();
// "1.2 GiB", "340 MiB".
std::string FormatBytes(int64_t bytes);

}  // namespace quantkit
