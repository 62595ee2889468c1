// quantkit tensor-calib FILE.npy [--method max|entropy|percentile[:P]|mse|all] [--json]:
// the amax each calibration method gives for one tensor, plus a histogram summary. Methods run on
// the pytorch-quantization reference histogram (2048 |x| bins), so numbers match it.
#include <cstdio>
#include <memory>

#include "cli_util.h"
#include "numeric_options.h"
#include "quantkit/pipelines.h"

namespace quantkit::cli {

void SetupTensorCalib(CLI::App& app, RunFn* run) {
  struct Options {
    TensorCalibOptions calib;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "tensor-calib", "Print the amax each calibration method gives for one tensor (.npy)");
  sub->add_option("file", opts->calib.file, "tensor as a .npy file")->required();
  sub->add_option("--method", opts->calib.methods,
                  "max, entropy, percentile[:P] (default P 99.99), mse or all; repeatable")
      ->delimiter(',');
  sub->add_option("--bins", opts->calib.bins,
                  "histogram bins (default 2048; memory and time grow with it)")
      ->transform(InRange(kMinTensorCalibBins, kMaxTensorCalibBins));
  sub->add_flag("--json", opts->json, "print JSON");
  sub->callback([opts, run] {
    *run = [opts]() -> int {
      auto r = CalibrateTensorFile(opts->calib);
      if (!r.ok()) return Report(r.status());
      std::fputs((opts->json ? r->json : r->text).c_str(), stdout);
      return 0;
    };
  });
}

}  // namespace quantkit::cli
