#include "common/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <unordered_set>
#include <utility>

namespace quantkit {

namespace {

// Length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no overlong forms, no
// surrogates, at most U+10FFFF), or 0 when the bytes there are not one.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = at(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (b >= 0xc2 && b <= 0xdf) {
    n = 2;
  } else if (b >= 0xe0 && b <= 0xef) {
    n = 3;
    if (b == 0xe0) lo = 0xa0;  // overlong
    if (b == 0xed) hi = 0x9f;  // surrogates
  } else if (b >= 0xf0 && b <= 0xf4) {
    n = 4;
    if (b == 0xf0) lo = 0x90;  // overlong
    if (b == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  }
  return n;
}

}  // namespace

std::string EscapeControl(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) {
      out += c;
      ++i;
      continue;
    }
    if (b >= 0x80) {
      // Well-formed UTF-8 stays readable, except the C1 controls U+0080..U+009F (0xc2 0x80..0x9f:
      // U+009B is a CSI that terminals obey like ESC [).
      const size_t n = Utf8SequenceLength(text, i);
      if (n > 0 && !(b == 0xc2 && static_cast<unsigned char>(text[i + 1]) <= 0x9f)) {
        out.append(text.substr(i, n));
        i += n;
        continue;
      }
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += fmt::format("\\x{:02x}", b);
    }
    ++i;
  }
  return out;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  for (const char c : EscapeControl(text)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// Levenshtein distance, two rows; names are short (node and tensor names, subcommands).
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::vector<std::string> ClosestNames(std::string_view name,
                                      const std::vector<std::string>& candidates,
                                      size_t max_count) {
  // A candidate is close when at most a third of the longer name must change, or when one name
  // contains the other ("Softmax" for "/head/Softmax").
  std::vector<std::pair<size_t, size_t>> scored;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& c = candidates[i];
    if (c.empty()) continue;
    const size_t d = EditDistance(name, c);
    const bool contains = !name.empty() && (c.find(name) != std::string::npos ||
                                            name.find(c) != std::string_view::npos);
    if (contains || d * 3 <= std::max(name.size(), c.size()))
      scored.emplace_back(contains ? 0 : d, i);
  }
  std::stable_sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const auto& [d, i] : scored) {
    if (out.size() == max_count) break;
    if (std::find(out.begin(), out.end(), candidates[i]) == out.end()) out.push_back(candidates[i]);
  }
  return out;
}

std::string ListSome(const std::vector<std::string>& names, size_t max_count) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < max_count; ++i) {
    out += (i ? ", '" : "'") + EscapeControl(names[i]) + "'";
  }
  if (names.size() > max_count) out += fmt::format(", ... ({} in all)", names.size());
  return out;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates,
                       std::string_view what) {
  const std::vector<std::string> close = ClosestNames(name, candidates);
  if (!close.empty()) return "; did you mean " + ListSome(close) + "?";
  if (what.empty()) return "";
  // Distinct names in their order of appearance (op types repeat, values may be listed twice).
  std::vector<std::string> distinct;
  std::unordered_set<std::string_view> seen;
  for (const std::string& c : candidates) {
    if (!c.empty() && seen.insert(c).second) distinct.push_back(c);
  }
  if (distinct.empty()) return fmt::format("; there are no {}", what);
  return fmt::format("; no close match among the {} {}: {}", distinct.size(), what,
                     ListSome(distinct));
}

}  // namespace quantkit
