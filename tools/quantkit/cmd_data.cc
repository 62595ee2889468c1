// quantkit data MODEL --data SPEC [--resize ...] [--samples N] -o DIR
// Shows exactly what calibrate and eval feed the model: the decoded, preprocessed samples as
// DIR/<input>.npy (and DIR/labels.npy), e.g. to compare with a torchvision pipeline.
#include <cstdio>

#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupData(CLI::App& app, RunFn* run) {
  struct Options {
    WriteDataOptions write;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "data",
      "Write the samples a --data spec gives a model (after the declared preprocessing) as .npy");
  cmd->add_option("model", opts->write.model, "ONNX model whose inputs the data feeds")->required();
  cmd->add_option("--data", opts->write.data, "data, as for calibrate")->required();
  cmd->add_option("-o,--output-dir", opts->write.output_dir,
                  "writes <input>.npy and labels.npy here")
      ->required();
  cmd->add_option("--samples", opts->write.samples,
                  "the first N samples (0: all; all are held in memory)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  AddImageOptions(cmd, &opts->write.image);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      auto r = WriteData(opts->write);
      if (!r.ok()) return Report(r.status());
      std::fputs(r->text.c_str(), stdout);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
