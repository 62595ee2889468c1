#include "device_option.h"

#include "quantkit/runtime.h"

namespace quantkit::cli {

void AddDeviceOptions(CLI::App& app, std::string* device) {
  auto runs_models = [](CLI::App* sub) {
    for (const char* name : kDeviceSubcommands) {
      if (sub->get_name() == name) return true;
    }
    return false;
  };
  for (CLI::App* sub : app.get_subcommands(runs_models)) {
    sub->add_option(
           "--device", *device,
           "where the model runs: cpu, cuda or cuda:N (weights and activations stay on the "
           "GPU; needs a CUDA build, docs/gpu.md)")
        ->envname("QUANTKIT_DEVICE")
        ->capture_default_str();
  }
}

Status ApplyDeviceOption(CLI::App& app, const std::string& text) {
  if (Status used = UseDevice(text); !used.ok()) return used;
  if (!UsingCuda()) return Status::Ok();
  for (CLI::App* sub : app.get_subcommands()) {
    if (sub->get_name() == "qat") continue;  // the batch size of training is the user's to choose
    CLI::Option* batch = sub->get_option_no_throw("--batch-size");
    if (batch == nullptr || batch->count() > 0) continue;
    batch->add_result(std::to_string(kCudaDefaultBatchSize));
    batch->run_callback();
  }
  return Status::Ok();
}

}  // namespace quantkit::cli
