// Text helpers for callers that print what quantkit returns (the CLI, scripts): names in reports
// and messages come from untrusted files. The very functions the library formats with
// (common/text.h, common/progress.h), declared here for callers outside it.
// Public header: standard library and quantkit types only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace quantkit {

// `text` with every control character escaped: \n, \r, \t as themselves, ESC and the other
// C0/DEL bytes as \xNN, so that printing a name cannot clear the terminal or forge a second
// message. Bytes >= 0x80 pass through (UTF-8 names stay readable).
std::string EscapeControl(std::string_view text);

// The suffix of the "matches nothing" messages: "; did you mean 'a', 'b'?" for the candidates
// closest to `name`, else "; no close match among the N <what>: 'a', 'b', ...".
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates,
                       std::string_view what);

// "1.5 GiB", "12.0 MiB", "512 B".
std::string FormatBytes(int64_t bytes);

}  // namespace quantkit
