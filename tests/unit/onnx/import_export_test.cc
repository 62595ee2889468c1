// ImportModel / ExportModel: field coverage, typed-field normalisation, IR-10 unknown fields,
// subgraph captures, atomic writes.
#include <gtest/gtest.h>

#include <cstring>

#include "ir/verifier.h"
#include "onnx/export.h"
#include "onnx/import.h"
#include "onnx_test_util.h"
#include "testing/onnx_compare.h"

namespace quantkit::onnx_io {
namespace {

using testutil::ParseModel;
using testutil::SmallModel;
using testutil::TempDir;

ir::Model Import(const ::onnx::ModelProto& proto, const ImportOptions& options = {}) {
  auto model = ImportModelFromBytes(proto.SerializeAsString(), options);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? std::move(model).value() : ir::Model{};
}

// Exports `model` and returns the normalised difference with `original` ("" when equal).
std::string DiffAfterRoundTrip(::onnx::ModelProto original, const ir::Model& model) {
  auto bytes = ExportModelToBytes(model);
  if (!bytes.ok()) return bytes.status().ToString();
  ::onnx::ModelProto exported;
  if (!exported.ParseFromString(*bytes)) return "does not parse";
  std::string norm =
      testing::NormalizeModel(&original, ".") + testing::NormalizeModel(&exported, ".");
  return norm.empty() ? testing::FirstDifference(original, exported) : norm;
}

TEST(Import, SmallModelFields) {
  ir::Model model = Import(SmallModel());
  EXPECT_EQ(model.ir_version, 8);
  EXPECT_EQ(model.OpsetFor(""), 17);
  EXPECT_EQ(model.producer_name, "quantkit-test");
  const ir::Graph& g = *model.graph;
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.inputs()[0]->type.ToString(), "float[N,4]");
  ASSERT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(g.nodes()[1]->op_type(), "Add");
  const ir::Value* w = g.FindValue("w");
  ASSERT_TRUE(w && w->initializer);
  // float_data became raw little-endian floats.
  ASSERT_EQ(w->initializer->nbytes(), 16u);
  EXPECT_EQ(w->initializer->data_as<float>()[3], 4.0f);
  EXPECT_TRUE(ir::Verify(model).ok());
}

TEST(Import, ComparatorSeesADifferentWeight) {
  // Guards the round-trip suite: a changed byte must be reported, not normalised away.
  ::onnx::ModelProto original = SmallModel();
  ir::Model model = Import(original);
  model.graph->FindValue("w")->initializer->mutable_data_as<float>()[0] = 9.0f;
  const std::string diff = DiffAfterRoundTrip(original, model);
  EXPECT_NE(diff.find("raw_data"), std::string::npos) << diff;
}

// One tensor per ONNX typed-field rule, with the raw bytes each must produce.
TEST(Import, TypedFieldsBecomeRawBytes) {
  ::onnx::ModelProto proto = SmallModel();
  auto add = [&](const char* name, int dtype, std::vector<int64_t> dims) {
    auto* t = proto.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(dtype);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  };
  auto* f16 = add("f16", ::onnx::TensorProto::FLOAT16, {2});
  f16->add_int32_data(0x3C00);    // 1.0
  f16->add_int32_data(0xC000);    // -2.0
  auto* i4 = add("i4", 22, {3});  // int4: one byte (two nibbles) per int32_data entry
  i4->add_int32_data(0x21);
  i4->add_int32_data(0x03);
  auto* u32 = add("u32", ::onnx::TensorProto::UINT32, {1});
  u32->add_uint64_data(0xFFFFFFFFu);
  auto* b = add("b", ::onnx::TensorProto::BOOL, {2});
  b->add_int32_data(1);
  b->add_int32_data(0);
  auto* c64 = add("c64", ::onnx::TensorProto::COMPLEX64, {1});
  c64->add_float_data(1.5f);
  c64->add_float_data(-0.5f);
  auto* s = add("s", ::onnx::TensorProto::STRING, {2});
  s->add_string_data("ab");
  s->add_string_data("");

  ir::Model model = Import(proto);
  const ir::Graph& g = *model.graph;
  const auto* h = g.FindValue("f16")->initializer->data_as<uint16_t>();
  EXPECT_EQ(h[0], 0x3C00);
  EXPECT_EQ(h[1], 0xC000);
  const ir::Tensor& t4 = *g.FindValue("i4")->initializer;
  ASSERT_EQ(t4.nbytes(), 2u);
  EXPECT_EQ(t4.data_as<uint8_t>()[0], 0x21);
  EXPECT_EQ(t4.data_as<uint8_t>()[1], 0x03);
  EXPECT_EQ(g.FindValue("u32")->initializer->data_as<uint32_t>()[0], 0xFFFFFFFFu);
  EXPECT_EQ(g.FindValue("b")->initializer->data_as<uint8_t>()[0], 1);
  EXPECT_EQ(g.FindValue("c64")->initializer->data_as<float>()[1], -0.5f);
  EXPECT_EQ(g.FindValue("s")->initializer->strings(), (std::vector<std::string>{"ab", ""}));
  EXPECT_EQ(DiffAfterRoundTrip(proto, model), "");
}

TEST(Import, TypedFieldCountMismatchIsRejected) {
  ::onnx::ModelProto proto = SmallModel();
  proto.mutable_graph()->mutable_initializer(0)->add_float_data(5.0f);  // 5 values for dims [4]
  auto model = ImportModelFromBytes(proto.SerializeAsString(), {}, "m.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidModel);
  EXPECT_EQ(model.status().message(),
            "m.onnx: initializer 'w': declares 4 elements of float but float_data holds 5 values "
            "(expected 4); no data to allocate");
}

// IR-10 fields unknown to libonnx 1.12 live in unknown fields; they must reach the IR and come
// back out.
TEST(Import, Ir10FieldsSurviveAsUnknownFields) {
  ::onnx::ModelProto proto = SmallModel();
  proto.set_ir_version(10);
  ::onnx::StringStringEntryProto entry;
  entry.set_key("k");
  entry.set_value("v");
  auto* node = proto.mutable_graph()->mutable_node(0);
  node->mutable_unknown_fields()->AddLengthDelimited(8, "my_overload");
  node->mutable_unknown_fields()->AddLengthDelimited(9, entry.SerializeAsString());
  proto.mutable_graph()->mutable_unknown_fields()->AddLengthDelimited(16,
                                                                      entry.SerializeAsString());
  proto.mutable_graph()->mutable_input(0)->mutable_unknown_fields()->AddLengthDelimited(
      4, entry.SerializeAsString());
  proto.mutable_graph()->mutable_initializer(0)->mutable_unknown_fields()->AddLengthDelimited(
      16, entry.SerializeAsString());

  ir::Model model = Import(proto);
  const ir::Graph& g = *model.graph;
  EXPECT_EQ(g.nodes()[0]->overload, "my_overload");
  ASSERT_EQ(g.nodes()[0]->metadata_props.size(), 1u);
  EXPECT_EQ(g.nodes()[0]->metadata_props[0].second, "v");
  EXPECT_EQ(g.metadata_props.size(), 1u);
  EXPECT_EQ(g.inputs()[0]->metadata_props.size(), 1u);
  EXPECT_EQ(g.FindValue("w")->initializer->metadata_props.size(), 1u);
  // The comparator compares unknown fields too: an exporter that dropped them fails here.
  EXPECT_EQ(DiffAfterRoundTrip(proto, model), "");
}

TEST(Import, SubgraphUsesOfOuterValuesBecomeCaptures) {
  ::onnx::ModelProto proto = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (bool c, float[2] x) => (float[2] y) {
      t = Relu(x)
      y = If(c) <
        then_branch = then_g () => (float[2] a) { a = Neg(t) },
        else_branch = else_g () => (float[2] b) { b = Identity(x) }
      >
    })");
  ir::Model model = Import(proto);
  const ir::Node* if_node = model.graph->nodes()[1];
  const ir::Graph* then_g = if_node->attr("then_branch")->graph();
  ASSERT_NE(then_g, nullptr);
  EXPECT_EQ(then_g->parent(), model.graph.get());
  ASSERT_NE(then_g->FindValue("t"), nullptr);
  EXPECT_TRUE(then_g->FindValue("t")->is_outer_scope());
  EXPECT_TRUE(if_node->attr("else_branch")->graph()->FindValue("x")->is_outer_scope());
  EXPECT_EQ(DiffAfterRoundTrip(proto, model), "");
}

TEST(Import, SparseInitializerRoundTrips) {
  ::onnx::ModelProto proto = SmallModel();
  auto* sparse = proto.mutable_graph()->add_sparse_initializer();
  sparse->add_dims(2);
  sparse->add_dims(3);
  auto* values = sparse->mutable_values();
  values->set_name("sp");
  values->set_data_type(::onnx::TensorProto::FLOAT);
  values->add_dims(2);
  values->add_float_data(1.0f);
  values->add_float_data(2.0f);
  auto* indices = sparse->mutable_indices();
  indices->set_data_type(::onnx::TensorProto::INT64);
  indices->add_dims(2);
  indices->add_int64_data(1);
  indices->add_int64_data(5);
  ir::Model model = Import(proto);
  const ir::Value* v = model.graph->FindValue("sp");
  ASSERT_TRUE(v && v->sparse_initializer);
  EXPECT_EQ(v->sparse_initializer->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(DiffAfterRoundTrip(proto, model), "");

  // An index past the dense size would let a consumer write out of bounds.
  indices->set_int64_data(1, 6);
  auto bad = ImportModelFromBytes(proto.SerializeAsString());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sparse index 6 out of range [0, 6)"), std::string::npos)
      << bad.status().message();
}

TEST(Export, FileRoundTripIsAtomicAndLeavesNoTempFiles) {
  TempDir dir;
  const std::string path = dir.File("m.onnx");
  testutil::WriteBytes(path, "old contents");
  ir::Model model = Import(SmallModel());
  ASSERT_TRUE(ExportModel(model, path).ok());
  auto again = ImportModel(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->graph->num_nodes(), 2u);
  EXPECT_EQ(again->source_path, path);
  // Only the model remains: the temp file was renamed, not copied.
  EXPECT_EQ(std::system(("test $(ls -A '" + dir.path() + "' | wc -l) -eq 1").c_str()), 0);
}

TEST(Export, FailureLeavesNoOutput) {
  TempDir dir;
  const std::string path = dir.File("missing_dir/m.onnx");
  ir::Model model = Import(SmallModel());
  const Status s = ExportModel(model, path);
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(testutil::FileExists(path));
}

TEST(Export, ToBytesRefusesExternalData) {
  ir::Model model = Import(SmallModel());
  ExportOptions options;
  options.external_data = true;
  auto bytes = ExportModelToBytes(model, options);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantkit::onnx_io
