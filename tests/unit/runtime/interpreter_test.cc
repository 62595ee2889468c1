// Interpreter behaviour on graphs built directly in the IR: execution, liveness, observers,
// subgraph captures, dynamic shapes and every bad-input path (each names what failed).
#include "runtime/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "ir/graph.h"
#include "testing/tolerances.h"

namespace quantkit::runtime {
namespace {

using ir::Dim;
using ir::DType;

ir::Tensor Floats(std::vector<int64_t> dims, std::vector<float> v) {
  return ir::Tensor::FromVector(DType::kFloat, std::move(dims), v);
}

ir::Value* AddInput(ir::Graph& g, const std::string& name, std::vector<Dim> dims,
                    DType dtype = DType::kFloat) {
  ir::Value* v = g.CreateValue(name);
  v->type = ir::TypeInfo::Tensor(dtype, std::move(dims));
  g.AddInput(v);
  return v;
}

ir::Node* Add(ir::Graph& g, const std::string& op, std::vector<ir::Value*> in,
              std::vector<std::string> out, const std::string& name) {
  auto n = g.AddNode(op, in, out, "", name);
  EXPECT_TRUE(n.ok()) << n.status().ToString();
  return *n;
}

// y = Relu(x) + c, with x: float[N, 2] (N symbolic) and c a constant initializer.
ir::Model ReluAddModel() {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Symbolic("N"), Dim::Known(2)});
  ir::Value* c = g.AddInitializer("c", Floats({2}, {10, 20}));
  ir::Node* relu = Add(g, "Relu", {x}, {"r"}, "relu1");
  ir::Node* add = Add(g, "Add", {relu->output(0), c}, {"y"}, "add1");
  g.AddOutput(add->output(0));
  return m;
}

std::unique_ptr<Interpreter> Make(ir::Model m, InterpreterOptions opts = {}) {
  auto r = Interpreter::Create(std::move(m), std::move(opts));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(Interpreter, RunsAndSupportsChangingShapes) {
  auto it = Make(ReluAddModel());
  ASSERT_TRUE(it);
  EXPECT_EQ(it->input_names(), std::vector<std::string>{"x"});
  auto out = it->Run({{"x", Floats({1, 2}, {-1, 2})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "y");
  const float* y = (*out)[0].tensor.data_as<float>();
  EXPECT_FLOAT_EQ(y[0], 10);
  EXPECT_FLOAT_EQ(y[1], 22);
  // A second run with another batch size needs no rebuild (dynamic shapes).
  auto out3 = it->Run({{"x", Floats({3, 2}, {1, 1, 2, 2, 3, 3})}});
  ASSERT_TRUE(out3.ok()) << out3.status().ToString();
  EXPECT_EQ((*out3)[0].tensor.dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_FLOAT_EQ((*out3)[0].tensor.data_as<float>()[5], 23);
}

TEST(Interpreter, UnsupportedOpFailsAtCreateNamingOpDomainOpsetNode) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* x = AddInput(g, "x", {Dim::Known(1)});
  ir::Node* n = Add(g, "FrobnicateTensor", {x}, {"y"}, "frob7");
  g.AddOutput(n->output(0));
  auto r = Interpreter::Create(std::move(m));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(r.status().message(),
            "unsupported op 'FrobnicateTensor' (domain 'ai.onnx', opset 17) at node 'frob7'");
}

TEST(Interpreter, UnsupportedOpInsideSubgraphFailsBeforeCompute) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* cond = AddInput(g, "cond", {}, DType::kBool);
  ir::Node* n = Add(g, "If", {cond}, {"y"}, "if1");
  for (const char* branch : {"then_branch", "else_branch"}) {
    ir::Attribute a;
    a.name = branch;
    a.type = ir::AttrType::kGraph;
    a.graphs.push_back(std::make_unique<ir::Graph>(&g));
    ir::Graph& sub = *a.graphs.back();
    ir::Node* k = *sub.AddNode("NoSuchOp", {}, {std::string("o_") + branch}, "", "inner");
    sub.AddOutput(k->output(0));
    n->SetAttr(std::move(a));
  }
  g.AddOutput(n->output(0));
  auto r = Interpreter::Create(std::move(m));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unsupported op 'NoSuchOp'"), std::string::npos)
      << r.status().message();
}

TEST(Interpreter, IfBodyReadsOuterScopeValue) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* cond = AddInput(g, "cond", {}, DType::kBool);
  ir::Value* x = AddInput(g, "x", {Dim::Known(2)});
  ir::Node* neg = Add(g, "Neg", {x}, {"nx"}, "neg");
  ir::Node* n = Add(g, "If", {cond}, {"y"}, "if1");
  const char* ops[] = {"Relu", "Abs"};
  const char* names[] = {"then_branch", "else_branch"};
  for (int i = 0; i < 2; ++i) {
    ir::Attribute a;
    a.name = names[i];
    a.type = ir::AttrType::kGraph;
    a.graphs.push_back(std::make_unique<ir::Graph>(&g));
    ir::Graph& sub = *a.graphs.back();
    ir::Value* cap = sub.CreateValue("nx");  // capture of the outer 'nx'
    sub.MarkOuterScope(cap);
    ir::Node* k = *sub.AddNode(ops[i], {cap}, {std::string("o") + std::to_string(i)}, "", "body");
    sub.AddOutput(k->output(0));
    n->SetAttr(std::move(a));
  }
  (void)neg;
  g.AddOutput(n->output(0));
  auto it = Make(std::move(m));
  ASSERT_TRUE(it);
  ir::Tensor t(DType::kBool, {});
  *t.mutable_data_as<bool>() = false;
  auto out = it->Run({{"cond", t}, {"x", Floats({2}, {-3, 4})}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_FLOAT_EQ((*out)[0].tensor.data_as<float>()[0], 3);  // Abs(Neg(x))
  EXPECT_FLOAT_EQ((*out)[0].tensor.data_as<float>()[1], 4);
}

TEST(Interpreter, RejectsBadInputsWithNamedMessages) {
  auto it = Make(ReluAddModel());
  ASSERT_TRUE(it);
  auto unknown = it->Run({{"z", Floats({1, 2}, {0, 0})}});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown input 'z'"), std::string::npos);
  auto missing = it->Run({});
  EXPECT_NE(missing.status().message().find("missing input 'x'"), std::string::npos);
  auto shape = it->Run({{"x", Floats({1, 3}, {0, 0, 0})}});
  EXPECT_EQ(shape.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shape.status().message().find("input 'x' has shape [1,3]"), std::string::npos)
      << shape.status().message();
  auto dtype =
      it->Run({{"x", ir::Tensor::FromVector(DType::kInt64, {1, 2}, std::vector<int64_t>{1, 2})}});
  EXPECT_NE(dtype.status().message().find("input 'x' has dtype int64"), std::string::npos)
      << dtype.status().message();
}

TEST(Interpreter, WarnsAboutNanAndInfButRuns) {
  std::vector<std::string> warnings;
  InterpreterOptions opts;
  opts.warn = [&](const std::string& w) { warnings.push_back(w); };
  auto it = Make(ReluAddModel(), opts);
  ASSERT_TRUE(it);
  auto out =
      it->Run({{"x", Floats({1, 2}, {std::nanf(""), std::numeric_limits<float>::infinity()})}});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("input 'x' contains 1 NaN and 1 Inf"), std::string::npos)
      << warnings[0];
}

TEST(Interpreter, HugeShapeIsResourceExhaustedNotACrash) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* shape = g.AddInitializer(
      "shape",
      ir::Tensor::FromVector(DType::kInt64, {3}, std::vector<int64_t>{1 << 20, 1 << 20, 1 << 20}));
  ir::Node* n = Add(g, "ConstantOfShape", {shape}, {"y"}, "huge");
  g.AddOutput(n->output(0));
  auto it = Make(std::move(m));
  ASSERT_TRUE(it);
  auto out = it->Run({});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().ToString();
  EXPECT_NE(out.status().message().find("node 'huge' (ConstantOfShape, opset 17)"),
            std::string::npos);
}

TEST(Interpreter, ComputeErrorNamesNodeAndOp) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* a = AddInput(g, "a", {Dim::Symbolic("M"), Dim::Symbolic("K")});
  ir::Value* b = AddInput(g, "b", {Dim::Symbolic("K2"), Dim::Symbolic("N")});
  ir::Node* n = Add(g, "MatMul", {a, b}, {"y"}, "mm1");
  g.AddOutput(n->output(0));
  auto it = Make(std::move(m));
  auto out = it->Run(
      {{"a", Floats({2, 3}, std::vector<float>(6))}, {"b", Floats({2, 2}, std::vector<float>(4))}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message().rfind("node 'mm1' (MatMul, opset 17): ", 0), 0u)
      << out.status().message();
}

// Counts and checks the tensors an observer sees.
class Recorder : public Observer {
 public:
  Status OnTensor(const std::string& name, const ir::Node* producer,
                  const TensorView& view) override {
    names.push_back(name);
    producers.push_back(producer ? producer->name : "");
    if (name == "r") r0 = view.data_as<float>()[0];
    return Status::Ok();
  }
  std::vector<std::string> names, producers;
  float r0 = -1;
};

TEST(Interpreter, ObserversSeeEveryTensorOrASubset) {
  auto it = Make(ReluAddModel());
  Recorder all;
  RunOptions opts;
  opts.observers = {&all};
  ASSERT_TRUE(it->Run({{"x", Floats({1, 2}, {-1, 5})}}, opts).ok());
  EXPECT_EQ(all.names, (std::vector<std::string>{"x", "r", "y"}));
  EXPECT_EQ(all.producers, (std::vector<std::string>{"", "relu1", "add1"}));
  EXPECT_EQ(all.r0, 0.0f);

  struct Only : NamedObserver {
    using NamedObserver::NamedObserver;
    Status OnTensor(const std::string& name, const ir::Node*, const TensorView& v) override {
      seen.push_back(name);
      shape = v.shape;
      return Status::Ok();
    }
    std::vector<std::string> seen;
    std::vector<int64_t> shape;
  } only({"r"});
  opts.observers = {&only};
  ASSERT_TRUE(it->Run({{"x", Floats({1, 2}, {-1, 5})}}, opts).ok());
  EXPECT_EQ(only.seen, std::vector<std::string>{"r"});
  EXPECT_EQ(only.shape, (std::vector<int64_t>{1, 2}));
}

TEST(Interpreter, ObserverErrorAbortsRun) {
  struct Failing : Observer {
    Status OnTensor(const std::string&, const ir::Node*, const TensorView&) override {
      return Status(StatusCode::kInternal, "collector full");
    }
  } failing;
  auto it = Make(ReluAddModel());
  RunOptions opts;
  opts.observers = {&failing};
  auto out = it->Run({{"x", Floats({1, 2}, {0, 0})}}, opts);
  EXPECT_EQ(out.status().message(), "collector full");
}

// Conv -> Relu -> MaxPool -> depthwise Conv (weight fed as an input, not a constant) -> Add ->
// Clip -> 1x1 Conv -> GlobalAveragePool: the ops a CNN chains between its convolutions.
ir::Model ConvChainModel() {
  ir::Model m;
  m.SetOpset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x =
      AddInput(g, "x", {Dim::Symbolic("N"), Dim::Known(3), Dim::Known(9), Dim::Known(9)});
  ir::Value* wd = AddInput(g, "wd", {Dim::Known(8), Dim::Known(1), Dim::Known(3), Dim::Known(3)});
  auto values = [](int64_t n, float step) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * step);
    return v;
  };
  ir::Value* w1 = g.AddInitializer("w1", Floats({8, 3, 3, 3}, values(8 * 3 * 3 * 3, 0.37f)));
  ir::Value* b1 = g.AddInitializer("b1", Floats({8}, values(8, 0.5f)));
  ir::Value* w3 = g.AddInitializer("w3", Floats({5, 8, 1, 1}, values(5 * 8, 0.71f)));
  ir::Node* conv1 = Add(g, "Conv", {x, w1, b1}, {"c1"}, "conv1");
  conv1->SetAttr(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
  ir::Node* relu = Add(g, "Relu", {conv1->output(0)}, {"r1"}, "relu1");
  ir::Node* pool = Add(g, "MaxPool", {relu->output(0)}, {"p1"}, "pool1");
  pool->SetAttr(ir::Attribute::Ints("kernel_shape", {3, 3}));
  pool->SetAttr(ir::Attribute::Ints("strides", {2, 2}));
  pool->SetAttr(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
  ir::Node* dw = Add(g, "Conv", {pool->output(0), wd}, {"c2"}, "conv2");
  dw->SetAttr(ir::Attribute::Int("group", 8));
  dw->SetAttr(ir::Attribute::Ints("pads", {1, 1, 1, 1}));
  ir::Node* add = Add(g, "Add", {dw->output(0), pool->output(0)}, {"a2"}, "add2");
  ir::Value* lo = g.AddInitializer("lo", Floats({}, {0.0f}));
  ir::Value* hi = g.AddInitializer("hi", Floats({}, {1.5f}));
  ir::Node* clip = Add(g, "Clip", {add->output(0), lo, hi}, {"k2"}, "clip2");
  ir::Node* conv3 = Add(g, "Conv", {clip->output(0), w3}, {"c3"}, "conv3");
  ir::Node* gap = Add(g, "GlobalAveragePool", {conv3->output(0)}, {"y"}, "gap");
  g.AddOutput(conv3->output(0));
  g.AddOutput(gap->output(0));
  return m;
}

// Records every observed tensor (shape and values as the observer sees them).
struct Snapshots : Observer {
  Status OnTensor(const std::string& name, const ir::Node*, const TensorView& v) override {
    shapes[name] = v.shape;
    values[name].assign(v.data_as<float>(), v.data_as<float>() + v.numel());
    return Status::Ok();
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::vector<float>> values;
};

// Channels-last execution is invisible: unobserved runs give the NCHW run's outputs (up to
// summation order); observed runs (calibration) keep the NCHW path, so observers see the same
// NCHW shapes and values bit for bit; a weight that is not a constant initializer works too.
TEST(Interpreter, ChannelsLastExecutionIsInvisibleToObserversAndOutputs) {
  std::vector<float> xs(2 * 3 * 9 * 9), wds(8 * 9);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::cos(static_cast<float>(i) * 0.13f) * 2.0f;
  for (size_t i = 0; i < wds.size(); ++i) wds[i] = std::sin(static_cast<float>(i) * 0.29f);
  const std::vector<NamedTensor> feeds = {{"x", Floats({2, 3, 9, 9}, xs)},
                                          {"wd", Floats({8, 1, 3, 3}, wds)}};
  std::vector<std::vector<NamedTensor>> outs, observed_outs;
  std::vector<Snapshots> seen(2);
  for (const bool channels_last : {false, true}) {
    InterpreterOptions o;
    o.channels_last = channels_last;
    auto it = Make(ConvChainModel(), o);
    ASSERT_TRUE(it);
    auto out = it->Run(feeds);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    outs.push_back(std::move(*out));
    RunOptions ro;
    ro.observers = {&seen[observed_outs.size()]};
    auto observed = it->Run(feeds, ro);
    ASSERT_TRUE(observed.ok()) << observed.status().ToString();
    observed_outs.push_back(std::move(*observed));
  }
  ASSERT_EQ(seen[1].values.size(), 10u);  // x, wd and the 8 node outputs
  EXPECT_EQ(seen[1].shapes.at("k2"), (std::vector<int64_t>{2, 8, 5, 5}));
  EXPECT_EQ(seen[0].shapes, seen[1].shapes);
  EXPECT_EQ(seen[0].values, seen[1].values);
  for (size_t k = 0; k < outs[0].size(); ++k) {
    const ir::Tensor& nchw = outs[0][k].tensor;
    const ir::Tensor& nhwc = outs[1][k].tensor;
    ASSERT_EQ(nchw.dims(), nhwc.dims());
    for (int64_t i = 0; i < nchw.numel(); ++i) {
      const float a = nchw.data_as<float>()[i];
      ASSERT_NEAR(nhwc.data_as<float>()[i], a,
                  testing::kChannelsLastAtol + testing::kChannelsLastRtol * std::fabs(a))
          << outs[0][k].name << "[" << i << "]";
    }
    const ir::Tensor& observed = observed_outs[1][k].tensor;
    EXPECT_EQ(
        std::vector<float>(observed.data_as<float>(), observed.data_as<float>() + observed.numel()),
        std::vector<float>(nchw.data_as<float>(), nchw.data_as<float>() + nchw.numel()));
  }
}

// A chain of 40 Relu nodes on a 1 MiB tensor: peak live memory stays a few tensors, not 40.
TEST(Interpreter, PeakMemoryFollowsLivenessNotGraphSize) {
  ir::Model m;
  m.SetOpset("", 17);
  ir::Graph& g = *m.graph;
  ir::Value* v = AddInput(g, "x", {Dim::Known(256), Dim::Known(1024)});
  for (int i = 0; i < 40; ++i)
    v = Add(g, "Neg", {v}, {"t" + std::to_string(i)}, "n" + std::to_string(i))->output(0);
  g.AddOutput(v);
  auto it = Make(std::move(m));
  RunStats stats;
  RunOptions opts;
  opts.stats = &stats;
  ASSERT_TRUE(it->Run({{"x", ir::Tensor(DType::kFloat, {256, 1024})}}, opts).ok());
  const int64_t one = 256 * 1024 * 4;
  EXPECT_LE(stats.peak_live_bytes, 3 * one);
  EXPECT_LE(stats.peak_live_values, 3);
}

}  // namespace
}  // namespace quantkit::runtime
