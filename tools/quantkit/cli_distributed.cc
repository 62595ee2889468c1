#include "cli_distributed.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/check.h"
#include "numeric_options.h"
#include "runtime/communicator.h"

namespace quantkit::cli {

void AddDistributedOptions(CLI::App* cmd, pipelines::DistributedOptions* options) {
  const char* group = "Distributed (torchrun, srun torchrun, PyTorchJob; docs/distributed.md)";
  cmd->add_flag("--distributed", options->required,
                "require a torch.distributed launch (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); "
                "without it a launch is still detected")
      ->group(group);
  cmd->add_option_function<double>(
         "--dist-timeout",
         [options](double seconds) {
           options->timeout = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
         },
         "seconds to wait for the other ranks at the rendezvous and at each step (default 1800)")
      ->check(InRange(1, 86400))
      ->group(group);
}

Status CheckDistributedLaunch(const CLI::App& app) {
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  if (chosen.empty()) return Status::Ok();
  const std::string name = chosen.front()->get_name();
  if (name == "calibrate" || name == "eval" || name == "analyze" || name == "fallback" || name == "qat" ||
      name == "diagnose") {
    return Status::Ok();
  }
  Result<std::optional<runtime::DistributedEnv>> env = runtime::ReadDistributedEnv();
  if (!env.ok() || !env->has_value() || (*env)->world_size == 1) return Status::Ok();
  return MakeStatus(StatusCode::kUnsupported,
                    "`quantkit {}` runs as one process, but this is rank {} of {} of a distributed "
                    "launch; only calibrate, eval, analyze, diagnose, fallback and qat share work across ranks "
                    "(docs/distributed.md)",
                    name, (*env)->rank, (*env)->world_size);
}

void PrintRankLine(const pipelines::RankReport& report) {
  std::fprintf(stderr, "quantkit: %s\n", pipelines::FormatRankLine(report).c_str());
}

}  // namespace quantkit::cli
