// External data: written by ExportOptions{external_data}, read memory-mapped, and every hostile
// variant (missing, short, out-of-range, escaping paths) rejected with one clear message.
#include <gtest/gtest.h>
#include <unistd.h>

#include "onnx/export.h"
#include "onnx/import.h"
#include "onnx_test_util.h"
#include "testing/onnx_compare.h"

namespace quantkit::onnx_io {
namespace {

using testutil::TempDir;

// SmallModel plus a 4000-byte initializer "big" (over the 1024-byte default threshold).
::onnx::ModelProto ModelWithBigWeight() {
  ::onnx::ModelProto proto = testutil::SmallModel();
  auto* big = proto.mutable_graph()->add_initializer();
  big->set_name("big");
  big->set_data_type(::onnx::TensorProto::FLOAT);
  big->add_dims(1000);
  for (int i = 0; i < 1000; ++i) big->add_float_data(static_cast<float>(i) * 0.5f);
  return proto;
}

// Writes ModelWithBigWeight to dir/m.onnx with its big weight in dir/m.onnx.data.
void WriteExternalModel(const TempDir& dir) {
  auto model = ImportModelFromBytes(ModelWithBigWeight().SerializeAsString());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ExportOptions options;
  options.external_data = true;
  ASSERT_TRUE(ExportModel(*model, dir.File("m.onnx"), options).ok());
}

// Rewrites one external_data entry of initializer "big" in dir/m.onnx.
void SetExternalEntry(const TempDir& dir, const std::string& key, const std::string& value) {
  ::onnx::ModelProto proto;
  std::string error;
  ASSERT_TRUE(testing::LoadModelProto(dir.File("m.onnx"), &proto, &error)) << error;
  for (auto& t : *proto.mutable_graph()->mutable_initializer()) {
    for (auto& e : *t.mutable_external_data()) {
      if (e.key() == key) e.set_value(value);
    }
  }
  testutil::WriteBytes(dir.File("m.onnx"), proto.SerializeAsString());
}

TEST(ExternalData, ExportWritesLargeTensorsAndImportMapsThem) {
  TempDir dir;
  WriteExternalModel(dir);
  ASSERT_TRUE(testutil::FileExists(dir.File("m.onnx.data")));
  auto model = ImportModel(dir.File("m.onnx"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ir::Tensor& big = *model->graph->FindValue("big")->initializer;
  EXPECT_EQ(big.location, ir::TensorLocation::kExternal);
  EXPECT_EQ(big.external.location, "m.onnx.data");
  EXPECT_EQ(big.external.offset % static_cast<int64_t>(kExternalDataAlignment), 0);
  EXPECT_EQ(big.data_as<float>()[999], 499.5f);
  // The small weight stays inline (16 bytes < threshold).
  EXPECT_EQ(model->graph->FindValue("w")->initializer->location, ir::TensorLocation::kInline);

  // Semantically the same model as before externalisation.
  ::onnx::ModelProto original = ModelWithBigWeight();
  ::onnx::ModelProto written;
  std::string error;
  ASSERT_TRUE(testing::LoadModelProto(dir.File("m.onnx"), &written, &error));
  EXPECT_EQ(testing::NormalizeModel(&original, dir.path()), "");
  EXPECT_EQ(testing::NormalizeModel(&written, dir.path()), "");
  EXPECT_EQ(testing::FirstDifference(original, written), "");
}

TEST(ExternalData, ReexportOverTheMappedFilesKeepsData) {
  // Writing over the files a model was mapped from must not corrupt it: the writer renames a
  // new file into place, the old mapping keeps the old inode.
  TempDir dir;
  WriteExternalModel(dir);
  auto model = ImportModel(dir.File("m.onnx"));
  ASSERT_TRUE(model.ok());
  ExportOptions options;
  options.external_data = true;
  ASSERT_TRUE(ExportModel(*model, dir.File("m.onnx"), options).ok());
  EXPECT_EQ(model->graph->FindValue("big")->initializer->data_as<float>()[10], 5.0f);
  auto again = ImportModel(dir.File("m.onnx"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->graph->FindValue("big")->initializer->data_as<float>()[10], 5.0f);
}

TEST(ExternalData, MissingFileIsNotFound) {
  TempDir dir;
  WriteExternalModel(dir);
  ASSERT_EQ(unlink(dir.File("m.onnx.data").c_str()), 0);
  auto model = ImportModel(dir.File("m.onnx"));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
  const std::string& msg = model.status().message();
  EXPECT_EQ(
      msg.rfind(dir.File("m.onnx") + ": initializer 'big': external data file 'm.onnx.data'", 0),
      0u)
      << msg;
}

TEST(ExternalData, ShortFileIsRejectedBeforeUse) {
  TempDir dir;
  WriteExternalModel(dir);
  ASSERT_EQ(truncate(dir.File("m.onnx.data").c_str(), 100), 0);
  auto model = ImportModel(dir.File("m.onnx"));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(model.status().message().find("lies outside file 'm.onnx.data' of 100 bytes"),
            std::string::npos)
      << model.status().message();
}

TEST(ExternalData, OffsetOutOfRangeIsRejected) {
  TempDir dir;
  WriteExternalModel(dir);
  SetExternalEntry(dir, "offset", "999999999999");
  auto model = ImportModel(dir.File("m.onnx"));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("lies outside file"), std::string::npos);
}

TEST(ExternalData, NonNumericOffsetIsRejected) {
  TempDir dir;
  WriteExternalModel(dir);
  SetExternalEntry(dir, "offset", "-4");
  auto model = ImportModel(dir.File("m.onnx"));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("not a valid non-negative integer"), std::string::npos);
}

TEST(ExternalData, LengthMustMatchDims) {
  TempDir dir;
  WriteExternalModel(dir);
  SetExternalEntry(dir, "length", "3996");
  auto model = ImportModel(dir.File("m.onnx"));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("length 3996 does not match the 4000 bytes"),
            std::string::npos);
}

TEST(ExternalData, PathsMayNotLeaveTheModelDirectory) {
  for (const char* location : {"../m.onnx.data", "/etc/passwd", "a/../../x"}) {
    TempDir dir;
    WriteExternalModel(dir);
    SetExternalEntry(dir, "location", location);
    auto model = ImportModel(dir.File("m.onnx"));
    ASSERT_FALSE(model.ok()) << location;
    EXPECT_EQ(model.status().code(), StatusCode::kInvalidModel);
    EXPECT_NE(model.status().message().find("must be a relative path inside the model directory"),
              std::string::npos)
        << model.status().message();
  }
}

TEST(ExternalData, SymlinkOutOfTheDirectoryIsRejected) {
  TempDir dir;
  TempDir elsewhere;
  WriteExternalModel(dir);
  ASSERT_EQ(rename(dir.File("m.onnx.data").c_str(), elsewhere.File("d").c_str()), 0);
  ASSERT_EQ(symlink(elsewhere.File("d").c_str(), dir.File("m.onnx.data").c_str()), 0);
  auto model = ImportModel(dir.File("m.onnx"));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("resolves outside the model directory"),
            std::string::npos);
}

TEST(ExternalData, FromBytesNeedsABaseDirectory) {
  TempDir dir;
  WriteExternalModel(dir);
  std::string bytes;
  std::string error;
  ::onnx::ModelProto proto;
  ASSERT_TRUE(testing::LoadModelProto(dir.File("m.onnx"), &proto, &error));
  auto no_dir = ImportModelFromBytes(proto.SerializeAsString());
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().code(), StatusCode::kInvalidArgument);
  ImportOptions options;
  options.base_dir = dir.path();
  auto with_dir = ImportModelFromBytes(proto.SerializeAsString(), options);
  EXPECT_TRUE(with_dir.ok()) << with_dir.status().ToString();
}

}  // namespace
}  // namespace quantkit::onnx_io
