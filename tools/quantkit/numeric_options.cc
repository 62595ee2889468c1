#include "numeric_options.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace quantkit::cli {
namespace {

// Whether `text` is already an integer in plain notation ([+-]digits), as CLI11 reads it.
bool PlainInteger(const std::string& text) {
  size_t i = text[0] == '-' || text[0] == '+' ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

CLI::Validator MakeRange(double lo, double hi, bool lo_exclusive) {
  // No spaces: --help shows it after the type ("INT:[1,65536]"), where tests read it back.
  const std::string range = fmt::format("{}{},{}]", lo_exclusive ? "(" : "[", lo, hi);
  auto check = [lo, hi, lo_exclusive, range](std::string& text) -> std::string {
    const char* begin = text.c_str();
    char* end = nullptr;
    errno = 0;
    const long double v = text.empty() ? 0 : std::strtold(begin, &end);
    if (text.empty() || end != begin + text.size())
      return fmt::format("'{}' is not a number in {}", text, range);
    if (!std::isfinite(v))
      return fmt::format("{} is not a finite number (expected one in {})", text, range);
    // Every option is stored as a double (or an integer): a value a double cannot hold as a normal
    // number would silently become 0 or a denormal (--scale 1e-400 gave blank images) or make the
    // later conversion throw (--lr 1e-320 aborted), so it is refused here.
    const long double magnitude = std::fabs(v);
    if (magnitude > std::numeric_limits<double>::max() ||
        (magnitude != 0 && magnitude < std::numeric_limits<double>::min())) {
      return fmt::format(
          "{} is out of range: expected a number in {} that a double holds (|x| >= {:g})", text,
          range, std::numeric_limits<double>::min());
    }
    const bool below = lo_exclusive ? v <= lo : v < lo;
    if (below || v > hi)
      return fmt::format("{} is out of range: expected a number in {}", text, range);
    // 1e3 -> 1000: CLI11 converts integers from plain notation only. Fractions stay as written
    // (an integer option then refuses them itself).
    if (v == std::floor(v) && !PlainInteger(text))
      text = fmt::format("{:.0f}", static_cast<long double>(v));
    return {};
  };
  return CLI::Validator(check, range, kRangeValidatorName);
}

bool IsNumeric(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  const std::string base = type.substr(0, type.find(':'));
  return base == "INT" || base == "UINT" || base == "FLOAT";
}

}  // namespace

CLI::Validator InRange(double lo, double hi) { return MakeRange(lo, hi, /*lo_exclusive=*/false); }
CLI::Validator AboveAndAtMost(double lo, double hi) {
  return MakeRange(lo, hi, /*lo_exclusive=*/true);
}

Status CheckNumericOptions(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (!IsNumeric(*option)) continue;
    try {
      option->get_validator(kRangeValidatorName);
    } catch (const CLI::OptionNotFound&) {
      const std::string command =
          app.get_name().empty() ? "quantkit" : "quantkit " + app.get_name();
      return Status(
          StatusCode::kInternal,
          fmt::format(
              "`{}` option {} takes a number but declares no range (tools/quantkit/numeric_options.h: "
              "add ->transform(InRange(lo, hi)))",
              command, option->get_name()));
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (Status checked = CheckNumericOptions(*sub); !checked.ok()) return checked;
  }
  return Status::Ok();
}

}  // namespace quantkit::cli
