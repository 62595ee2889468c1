// Running the built `quantkit` binary from a test: exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "common/file_util.h"

namespace quantkit::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `env_prefix quantkit args` through the shell with stdout/stderr captured in `dir`.
inline CommandResult RunQuantkit(const std::string& binary, const std::string& args,
                                 const std::string& dir, const std::string& env_prefix = "") {
  const std::string out = dir + "/stdout.txt";
  const std::string err = dir + "/stderr.txt";
  const std::string cmd =
      env_prefix + " " + binary + " " + args + " >'" + out + "' 2>'" + err + "'";
  CommandResult r;
  const int status = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto o = ReadFileToString(out);
  auto e = ReadFileToString(err);
  r.out = o.ok() ? *o : "";
  r.err = e.ok() ? *e : "";
  return r;
}

}  // namespace quantkit::testing
