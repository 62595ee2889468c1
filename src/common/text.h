// Text helpers for what quantkit shows a user: names taken from untrusted files are escaped
// before they reach a terminal, and a name that matches nothing is answered with the closest
// names that do exist.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace quantkit {

// Returns `text` with every control character escaped: \n, \r, \t as themselves, ESC and the
// other C0/DEL bytes as \xNN. A node name carrying "\x1b[2J" or a newline then prints as one
// visible line instead of clearing the terminal or forging a second message. Well-formed UTF-8
// passes through (names stay readable); bytes that are not (binary files, a cut sequence) and
// the C1 controls U+0080..U+009F are escaped as \xNN, so what reaches a terminal or a log is
// valid UTF-8 without control characters.
std::string EscapeControl(std::string_view text);

// EscapeControl, then the XML entities (& < > "): a name from a model file placed in SVG/XML
// text or an attribute stays well-formed and cannot inject markup.
std::string XmlEscape(std::string_view text);

// Up to `max_count` names of `candidates` closest to `name` (edit distance, ties by order of
// appearance; a candidate containing `name`, or contained in it, counts as close). Empty when
// nothing is reasonably close.
std::vector<std::string> ClosestNames(std::string_view name,
                                      const std::vector<std::string>& candidates,
                                      size_t max_count = 3);

// "'a', 'b', 'c', 'd', 'e', ... (57 in all)": the first `max_count` of `names` (escaped, in the
// given order), or all of them when there are no more; for messages that say what does exist.
std::string ListSome(const std::vector<std::string>& names, size_t max_count = 5);

// The suffix of the "matches nothing" messages: "; did you mean 'a', 'b'?" for ClosestNames(...).
// When nothing is close the user still learns what exists: "; no close match among the 57
// <what>: 'a', 'b', ... (57 in all)". "" only when `what` is empty and nothing is close.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates,
                       std::string_view what = {});

}  // namespace quantkit
