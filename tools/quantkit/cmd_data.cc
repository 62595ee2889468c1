// quantkit data MODEL --data SPEC [--resize ...] [--samples N] -o DIR
// Shows exactly what calibrate and eval feed the model: the decoded, preprocessed samples as
// DIR/<input>.npy (and DIR/labels.npy), e.g. to compare with a torchvision pipeline.
#include <cstdio>

#include "cli_util.h"
#include "numeric_options.h"
#include "data/source.h"
#include "onnx/import.h"

namespace quantkit::cli {

void SetupData(CLI::App& app, RunFn* run) {
  struct Options {
    std::string model, data, output_dir;
    int64_t samples = 16;
    ImageArgs image;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "data", "Write the samples a --data spec gives a model (after the declared preprocessing) as .npy");
  cmd->add_option("model", opts->model, "ONNX model whose inputs the data feeds")->required();
  cmd->add_option("--data", opts->data, "data, as for calibrate")->required();
  cmd->add_option("-o,--output-dir", opts->output_dir, "writes <input>.npy and labels.npy here")->required();
  cmd->add_option("--samples", opts->samples, "the first N samples (0: all; all are held in memory)")
      ->transform(InRange(0, kMaxCount))
      ->capture_default_str();
  AddImageOptions(cmd, &opts->image);
  cmd->callback([run, opts] {
    *run = [opts]() -> int {
      auto image = ToImageOptions(opts->image);
      if (!image.ok()) return Report(image.status());
      auto model = onnx_io::ImportModel(opts->model);
      if (!model.ok()) return Report(model.status());
      auto source = data::OpenSource(opts->data, data::ModelInputs(*model), *image);
      if (!source.ok()) return Report(source.status());
      std::unique_ptr<data::Source> s = data::Take(std::move(*source), opts->samples);
      if (int rc = Report(data::DumpSamples(*s, opts->output_dir))) return rc;
      std::printf("%s -> %s\n", s->Describe().c_str(), opts->output_dir.c_str());
      return 0;
    };
  });
}

}  // namespace quantkit::cli
