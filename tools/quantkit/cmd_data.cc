// quantkit data MODEL --data SPEC [--resize ...] [--samples N] -o DIR
// Shows exactly what calibrate and eval feed the model: the decoded, preprocessed samples as
// DIR/<input>.npy (and DIR/labels.npy), e.g. to compare with a torchvision pipeline.
#include "cli_util.h"
#include "quantkit/tools.h"

namespace quantkit::cli {

void SetupData(CLI::App& app, RunFn* run) {
  auto opts = std::make_shared<DumpDataOptions>();
  CLI::App* cmd = app.add_subcommand(
      "data",
      "Write the samples a --data spec gives a model (after the declared preprocessing) as .npy");
  cmd->add_option("model", opts->model, "ONNX model whose inputs the data feeds")->required();
  cmd->add_option("--data", opts->data, "data, as for calibrate")->required();
  cmd->add_option("-o,--output-dir", opts->output_dir, "writes <input>.npy and labels.npy here")
      ->required();
  cmd->add_option("--samples", opts->samples,
                  "the first N samples (0: all; all are held in memory)")
      ->capture_default_str();
  AddImageOptions(cmd, &opts->image);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      auto r = DumpData(*opts);
      if (!r.ok()) return Report(r.status());
      Print(r->text);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
