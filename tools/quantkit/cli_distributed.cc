#include "cli_distributed.h"

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "numeric_options.h"
#include "quantkit/runtime.h"

namespace quantkit::cli {

namespace {

constexpr const char* kGroup =
    "Distributed (torchrun, srun torchrun, PyTorchJob; docs/distributed.md)";

void AddDistributedOptions(CLI::App* cmd, bool* required, std::function<void(double)> set_timeout) {
  cmd->add_flag("--distributed", *required,
                "require a torch.distributed launch (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); "
                "without it a launch is still detected")
      ->group(kGroup);
  cmd->add_option_function<double>(
         "--dist-timeout", std::move(set_timeout),
         "seconds to wait for the other ranks at the rendezvous and at each step "
         "(default 1800)")
      ->transform(InRange(1, 86400))
      ->group(kGroup);
}

}  // namespace

void AddDistributedOptions(CLI::App* cmd, DistributedChoices* options) {
  AddDistributedOptions(cmd, &options->required,
                        [options](double seconds) { options->timeout_seconds = seconds; });
}

Status CheckDistributedLaunch(const CLI::App& app) {
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  if (chosen.empty()) return Status::Ok();
  const std::string name = chosen.front()->get_name();
  if (name == "calibrate" || name == "eval" || name == "analyze" || name == "fallback" ||
      name == "qat" || name == "diagnose") {
    return Status::Ok();
  }
  return RefuseUnderLaunch(
      "`quantkit " + name + "`",
      "only calibrate, eval, analyze, diagnose, fallback and qat share work across ranks");
}

void PrintRankLine(const std::string& line) {
  if (!line.empty()) std::fprintf(stderr, "quantkit: %s\n", line.c_str());
}

}  // namespace quantkit::cli
