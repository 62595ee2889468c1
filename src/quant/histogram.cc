#include "quant/histogram.h"

#include <cmath>

#include <fmt/format.h>

namespace quantkit::quant {

int64_t Histogram::Total() const {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  return total;
}

std::string Histogram::Validate() const {
  if (counts.empty()) return "histogram has no bins";
  if (edges.size() != counts.size() + 1) {
    return fmt::format("histogram has {} bins but {} edges (want {})", counts.size(), edges.size(),
                       counts.size() + 1);
  }
  for (size_t k = 0; k < edges.size(); ++k) {
    if (!std::isfinite(edges[k])) return fmt::format("histogram edge {} is not finite", k);
    if (k > 0 && edges[k] < edges[k - 1]) return fmt::format("histogram edge {} decreases", k);
  }
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] < 0) return fmt::format("histogram bin {} has a negative count", k);
  }
  return "";
}

}  // namespace quantkit::quant
