// RunModelFiles (the library side of `quantkit run`) on a node-test model with .npy files.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/npy.h"
#include "pipelines/run_model.h"

namespace quantkit::pipelines {
namespace {

namespace fs = std::filesystem;

const char kReluModel[] = "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx";

TEST(RunModelFiles, WritesOutputsAndDumpsAndSummarizes) {
  if (!fs::exists(kReluModel)) GTEST_SKIP() << "libonnx-testdata not installed";
  const fs::path dir = fs::path(testing::TempDir()) / "qk_run_model_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<float> x(3 * 4 * 5, -1.0f);
  x[7] = 2.5f;
  ASSERT_TRUE(data::WriteNpy((dir / "x.npy").string(),
                             ir::Tensor::FromVector(ir::DType::kFloat, {3, 4, 5}, x))
                  .ok());
  RunModelOptions opt;
  opt.model_path = kReluModel;
  opt.inputs = {{"x", (dir / "x.npy").string()}};
  opt.output_dir = (dir / "out").string();
  opt.dump_all = true;
  auto r = RunModelFiles(opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "y");
  EXPECT_EQ((*r)[0].max, 2.5);
  EXPECT_EQ((*r)[0].min, 0.0);
  EXPECT_NE((*r)[0].ToString().find("y: float[3,4,5] min=0 max=2.5"), std::string::npos)
      << (*r)[0].ToString();
  auto y = data::ReadNpy((dir / "out" / "y.npy").string());
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->data_as<float>()[7], 2.5f);
  EXPECT_TRUE(fs::exists(dir / "out" / "x.npy"));  // --dump all includes the graph input
}

TEST(RunModelFiles, WrongInputNameIsInvalidArgument) {
  if (!fs::exists(kReluModel)) GTEST_SKIP() << "libonnx-testdata not installed";
  const fs::path dir = fs::path(testing::TempDir()) / "qk_run_model_test2";
  fs::create_directories(dir);
  ASSERT_TRUE(
      data::WriteNpy((dir / "x.npy").string(), ir::Tensor(ir::DType::kFloat, {3, 4, 5})).ok());
  RunModelOptions opt;
  opt.model_path = kReluModel;
  opt.inputs = {{"nope", (dir / "x.npy").string()}};
  opt.output_dir = (dir / "out").string();
  auto r = RunModelFiles(opt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("unknown input 'nope'"), std::string::npos);
}

}  // namespace
}  // namespace quantkit::pipelines
