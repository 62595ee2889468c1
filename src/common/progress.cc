#include "common/progress.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace quantkit {
namespace {
constexpr int kBarWidth = 28;
constexpr double kRedrawSeconds = 0.1;
}  // namespace

Progress::Progress(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      enabled_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { Finish(); }

double Progress::ElapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::Advance(int64_t n) {
  done_ += n;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_draw_).count() >= kRedrawSeconds) {
    last_draw_ = now;
    Draw(false);
  }
}

void Progress::Finish() {
  if (finished_) return;
  finished_ = true;
  Draw(true);
}

void Progress::Draw(bool final) {
  if (!enabled_) return;
  const double elapsed = ElapsedSeconds();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  std::string line = label_ + " ";
  if (total_ > 0) {
    const double frac = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    const int filled = static_cast<int>(frac * kBarWidth);
    line += "[" + std::string(static_cast<size_t>(filled), '=') + (filled < kBarWidth ? ">" : "") +
            std::string(static_cast<size_t>(std::max(0, kBarWidth - filled - 1)), ' ') + "] ";
    line += fmt::format("{}/{} {}  {:.1f} {}/s", done_, total_, unit_, rate, unit_);
    if (!final && rate > 0) {
      line += fmt::format("  ETA {:.0f}s", static_cast<double>(total_ - done_) / rate);
    } else if (final) {
      line += fmt::format("  {:.1f}s", elapsed);
    }
  } else {
    line += fmt::format("{} {}  {:.1f} {}/s", done_, unit_, rate, unit_);
  }
  line += note_;
  std::fprintf(stderr, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
  std::fflush(stderr);
}

int64_t PeakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace quantkit
