// Models over protobuf's 2 GB limit: a 2.2 GB initializer in a sparse (hole-filled) external
// file, generated on the fly. Import maps it without copying; export streams it to a new external
// file; an all-inline export is refused before any copy is made.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "onnx/export.h"
#include "onnx/import.h"
#include "onnx_test_util.h"

namespace quantkit::onnx_io {
namespace {

constexpr int64_t kNumFloats = 550'000'000;  // 2.2e9 bytes: over 2^31
constexpr uint64_t kBytes = static_cast<uint64_t>(kNumFloats) * 4;

long MaxRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

TEST(LargeModel, OverTwoGigabytesLoadsAndSaves) {
  testutil::TempDir dir;
  // A sparse file: 2.2 GB of zeros that take no disk space, with one marker float at the end.
  {
    const int fd = open(dir.File("big.bin").c_str(), O_CREAT | O_WRONLY, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, static_cast<off_t>(kBytes)), 0);
    const float marker = 42.0f;
    ASSERT_EQ(pwrite(fd, &marker, 4, static_cast<off_t>(kBytes - 4)), 4);
    close(fd);
  }
  ::onnx::ModelProto proto = testutil::ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[1] i) => (float[1] y) {
      y = Gather(big, i)
    })");
  auto* big = proto.mutable_graph()->add_initializer();
  big->set_name("big");
  big->set_data_type(::onnx::TensorProto::FLOAT);
  big->add_dims(kNumFloats);
  big->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* location = big->add_external_data();
  location->set_key("location");
  location->set_value("big.bin");
  testutil::WriteBytes(dir.File("big.onnx"), proto.SerializeAsString());

  const long rss_before = MaxRssMiB();
  auto model = ImportModel(dir.File("big.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Tensor& t = *model->graph->FindValue("big")->initializer;
  ASSERT_EQ(t.nbytes(), kBytes);
  EXPECT_EQ(t.data_as<float>()[kNumFloats - 1], 42.0f);
  // Mapped, not copied: touching one page must not pull 2.2 GB into memory.
  EXPECT_LT(MaxRssMiB() - rss_before, 256);

  // All inline would exceed protobuf's limit: refused up front, nothing written.
  const Status inline_export = ExportModel(*model, dir.File("inline.onnx"));
  ASSERT_FALSE(inline_export.ok());
  EXPECT_EQ(inline_export.code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(testutil::FileExists(dir.File("inline.onnx")));

  ExportOptions options;
  options.external_data = true;
  options.location = "out.weights";
  const Status saved = ExportModel(*model, dir.File("out.onnx"), options);
  ASSERT_TRUE(saved.ok()) << saved.ToString();
  auto again = ImportModel(dir.File("out.onnx"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  const ir::Tensor& t2 = *again->graph->FindValue("big")->initializer;
  EXPECT_EQ(t2.nbytes(), kBytes);
  EXPECT_EQ(t2.external.location, "out.weights");
  EXPECT_EQ(t2.data_as<float>()[kNumFloats - 1], 42.0f);
  EXPECT_EQ(t2.data_as<float>()[0], 0.0f);
  // (RSS is not checked after the export: writing reads every page of the mapping, and those
  // clean file-backed pages count as resident although the kernel can drop them at any time.)
}

}  // namespace
}  // namespace quantkit::onnx_io
