#include "cli_distributed.h"

#include <cstdio>

namespace quantkit::cli {

void AddDistributedOptions(CLI::App* cmd, analysis::DistributedOptions* options) {
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
      ->check(CLI::Range(1.0, 86400.0))
      ->group(group);
}

void PrintRankLine(const analysis::RankReport& report) {
  std::fprintf(stderr, "quantkit: %s\n", analysis::FormatRankLine(report).c_str());
}

}  // namespace quantkit::cli
