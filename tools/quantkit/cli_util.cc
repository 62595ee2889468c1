#include "cli_util.h"

#include <cstdio>

namespace quantkit::cli {

int Report(const Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "quantkit: %s\n", status.message().c_str());
  return ExitCodeFor(status.code());
}

}  // namespace quantkit::cli
