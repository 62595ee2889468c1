// Recurrent ops: RNN, GRU, LSTM (opsets 7, 14 layout). The input projection X @ W^T + Wb is one
// matmul over all steps; the recurrence is a loop over time of ATen matmuls. The reverse
// direction reverses each batch entry's first sequence_lens[b] steps, runs forward and reverses
// the outputs back; steps past a sequence's length keep the state and output zeros.
//
// Gate layouts (rows of W/R/B): LSTM i,o,f,c (peepholes P: i,o,f); GRU z,r,h; RNN one gate.
#include <cmath>

#include "runtime/kernel.h"
#include "runtime/ops/ops.h"

namespace quantkit::runtime {
namespace {

using Out = std::vector<at::Tensor>;

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;

  at::Tensor operator()(const at::Tensor& x) const {
    if (name == "Sigmoid") return at::sigmoid(x);
    if (name == "Tanh") return at::tanh(x);
    if (name == "Relu") return at::relu(x);
    if (name == "Affine") return x * alpha + beta;
    if (name == "LeakyRelu") return at::leaky_relu(x, alpha);
    if (name == "ThresholdedRelu") return at::where(x > alpha, x, at::zeros_like(x));
    if (name == "ScaledTanh") return at::tanh(x * beta) * alpha;
    if (name == "HardSigmoid") return at::clamp(x * alpha + beta, 0, 1);
    if (name == "Elu") return at::where(x < 0, (at::exp(x) - 1) * alpha, x);
    if (name == "Softsign") return x / (at::abs(x) + 1);
    return at::softplus(x);  // Softplus (validated at construction)
  }
};

enum class Cell { kRnn, kGru, kLstm };

struct RnnAttrs {
  Cell cell = Cell::kRnn;
  int64_t hidden = 0;
  int64_t directions = 1;
  bool reverse_only = false;
  std::vector<Activation> acts;  // per direction: 1 (RNN), 2 (GRU), 3 (LSTM)
  double clip = 0;
  bool input_forget = false;
  bool linear_before_reset = false;
  bool batch_first = false;
};

Result<RnnAttrs> ReadRnn(const KernelInit& init, Cell cell) {
  RnnAttrs a;
  const ir::Node& n = init.node;
  a.cell = cell;
  a.hidden = n.GetInt("hidden_size", 0);
  const std::string dir = n.GetString("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") {
    return init.Error(StatusCode::kInvalidModel, "unknown direction '{}'", dir);
  }
  a.directions = dir == "bidirectional" ? 2 : 1;
  a.reverse_only = dir == "reverse";
  const size_t per_dir = cell == Cell::kRnn ? 1 : (cell == Cell::kGru ? 2 : 3);
  std::vector<std::string> names;
  if (const ir::Attribute* at = n.attr("activations")) names = at->strings;
  if (names.empty()) {
    static const char* kDefaults[] = {"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < a.directions; ++d) {
      if (cell == Cell::kRnn) {
        names.push_back("Tanh");
      } else {
        for (size_t i = 0; i < per_dir; ++i) names.push_back(kDefaults[i]);
      }
    }
  }
  if (names.size() != per_dir * a.directions) {
    return init.Error(StatusCode::kInvalidModel, "{} activations given, expected {}", names.size(),
                      per_dir * a.directions);
  }
  const std::vector<float> alphas = n.GetFloats("activation_alpha");
  const std::vector<float> betas = n.GetFloats("activation_beta");
  size_t ai = 0, bi = 0;
  static const char* kKnown[] = {
      "Sigmoid",    "Tanh",        "Relu", "Affine",   "LeakyRelu", "ThresholdedRelu",
      "ScaledTanh", "HardSigmoid", "Elu",  "Softsign", "Softplus"};
  for (const std::string& name : names) {
    if (std::find(std::begin(kKnown), std::end(kKnown), name) == std::end(kKnown)) {
      return init.Error(StatusCode::kUnsupported, "activation '{}'", name);
    }
    Activation act{name};
    // Defaults as in onnxruntime; explicit values are consumed in order by functions using them.
    const bool uses_alpha = name == "Affine" || name == "LeakyRelu" || name == "ThresholdedRelu" ||
                            name == "ScaledTanh" || name == "HardSigmoid" || name == "Elu";
    const bool uses_beta = name == "Affine" || name == "ScaledTanh" || name == "HardSigmoid";
    act.alpha = name == "LeakyRelu" ? 0.01 : (name == "HardSigmoid" ? 0.2 : 1.0);
    act.beta = name == "HardSigmoid" ? 0.5 : 0.0;
    if (uses_alpha && ai < alphas.size()) act.alpha = alphas[ai++];
    if (uses_beta && bi < betas.size()) act.beta = betas[bi++];
    a.acts.push_back(act);
  }
  a.clip = n.GetFloat("clip", 0.0f);
  a.input_forget = n.GetInt("input_forget", 0) != 0;
  a.linear_before_reset = n.GetInt("linear_before_reset", 0) != 0;
  a.batch_first = n.GetInt("layout", 0) != 0;
  if (a.hidden <= 0 && !init.ConstInput(2)) {
    // hidden_size is required by the spec; it can be derived from R when constant.
    return init.Error(StatusCode::kInvalidModel, "missing attribute 'hidden_size'");
  }
  return a;
}

// Reverses the first lens[b] steps of every batch entry of x [T, B, ...].
at::Tensor ReverseValid(const at::Tensor& x, const at::Tensor& lens) {
  const int64_t steps = x.size(0);
  at::Tensor t = at::arange(steps, lens.options()).reshape({-1, 1});
  at::Tensor src =
      at::where(t < lens.reshape({1, -1}), lens.reshape({1, -1}) - 1 - t, t);  // [T, B]
  std::vector<int64_t> shape = {steps, x.size(1)};
  shape.resize(x.dim(), 1);
  return at::gather(x, 0, src.reshape(shape).expand(x.sizes()).contiguous());
}

Out RunRnn(const RnnAttrs& a, KernelContext& c) {
  at::Tensor x = c.in(0);
  if (a.batch_first) x = x.transpose(0, 1);  // [T, B, I]
  const at::Tensor& w = c.in(1);
  const at::Tensor& r = c.in(2);
  const int64_t steps = x.size(0), batch = x.size(1);
  const int64_t hidden = a.hidden > 0 ? a.hidden : r.size(2);
  const int64_t gates = a.cell == Cell::kRnn ? 1 : (a.cell == Cell::kGru ? 3 : 4);
  const auto opts = x.options();
  // sequence_lens on x's device (a host shape tensor when it is a small constant).
  at::Tensor lens = c.has(4) ? c.in(4).to(x.device(), at::kLong)
                             : at::full({batch}, steps, opts.dtype(at::kLong));
  auto initial = [&](size_t idx) {
    if (!c.has(idx)) return at::zeros({a.directions, batch, hidden}, opts);
    return a.batch_first ? c.in(idx).transpose(0, 1) : c.in(idx);
  };
  at::Tensor h0 = initial(5);
  at::Tensor c0 = a.cell == Cell::kLstm ? initial(6) : at::Tensor();
  const size_t per_dir = a.acts.size() / a.directions;
  std::vector<at::Tensor> ys, hs, cs;
  for (int64_t d = 0; d < a.directions; ++d) {
    const bool backward = a.reverse_only || d == 1;
    const Activation* act = &a.acts[d * per_dir];
    at::Tensor xd = backward ? ReverseValid(x, lens) : x;
    at::Tensor wb = at::zeros({gates * hidden}, opts), rb = at::zeros({gates * hidden}, opts);
    if (c.has(3)) {
      wb = c.in(3)[d].narrow(0, 0, gates * hidden);
      rb = c.in(3)[d].narrow(0, gates * hidden, gates * hidden);
    }
    at::Tensor xw = at::matmul(xd, w[d].t()) + wb;  // [T, B, G*H]
    at::Tensor rt = r[d].t();
    at::Tensor p = a.cell == Cell::kLstm && c.has(7) ? c.in(7)[d] : at::Tensor();
    at::Tensor h = h0[d], cell = a.cell == Cell::kLstm ? c0[d] : at::Tensor();
    std::vector<at::Tensor> y(steps);
    auto clip = [&](const at::Tensor& v) { return a.clip > 0 ? at::clamp(v, -a.clip, a.clip) : v; };
    for (int64_t t = 0; t < steps; ++t) {
      at::Tensor m = (lens > t).to(x.scalar_type()).unsqueeze(1);  // [B, 1]
      at::Tensor hn, cn;
      if (a.cell == Cell::kRnn) {
        hn = act[0](clip(xw[t] + at::matmul(h, rt) + rb));
      } else if (a.cell == Cell::kGru) {
        auto xg = xw[t].chunk(3, 1);
        at::Tensor rw = r[d];
        at::Tensor rzr =
            at::matmul(h, rw.narrow(0, 0, 2 * hidden).t()) + rb.narrow(0, 0, 2 * hidden);
        auto hz = rzr.chunk(2, 1);
        at::Tensor z = act[0](clip(xg[0] + hz[0]));
        at::Tensor rr = act[0](clip(xg[1] + hz[1]));
        at::Tensor rh = rw.narrow(0, 2 * hidden, hidden).t();
        at::Tensor rbh = rb.narrow(0, 2 * hidden, hidden);
        at::Tensor hh = a.linear_before_reset ? act[1](clip(xg[2] + rr * (at::matmul(h, rh) + rbh)))
                                              : act[1](clip(xg[2] + at::matmul(rr * h, rh) + rbh));
        hn = (1 - z) * hh + z * h;
      } else {
        auto g = (xw[t] + at::matmul(h, rt) + rb).chunk(4, 1);  // i, o, f, c
        at::Tensor gi = g[0], go = g[1], gf = g[2], gc = g[3];
        if (p.defined()) {
          gi = gi + p.narrow(0, 0, hidden) * cell;
          gf = gf + p.narrow(0, 2 * hidden, hidden) * cell;
        }
        at::Tensor i = act[0](clip(gi));
        at::Tensor f = a.input_forget ? 1 - i : act[0](clip(gf));
        at::Tensor cc = act[1](clip(gc));
        cn = f * cell + i * cc;
        if (p.defined()) go = go + p.narrow(0, hidden, hidden) * cn;
        at::Tensor o = act[0](clip(go));
        hn = o * act[2](cn);
        cell = m * cn + (1 - m) * cell;
      }
      h = m * hn + (1 - m) * h;
      y[t] = hn * m;
    }
    at::Tensor yd = at::stack(y);  // [T, B, H]
    if (backward) yd = ReverseValid(yd, lens);
    ys.push_back(yd);
    hs.push_back(h);
    if (cell.defined()) cs.push_back(cell);
  }
  at::Tensor y = at::stack(ys, 1);  // [T, D, B, H]
  at::Tensor yh = at::stack(hs);    // [D, B, H]
  at::Tensor yc = cs.empty() ? at::Tensor() : at::stack(cs);
  if (a.batch_first) {
    y = y.permute({2, 0, 1, 3});
    yh = yh.transpose(0, 1);
    if (yc.defined()) yc = yc.transpose(0, 1);
  }
  Out out{y, yh};
  if (yc.defined()) out.push_back(yc);
  return out;
}

template <Cell cell>
Result<KernelPtr> MakeRnn(const KernelInit& init) {
  QK_ASSIGN_OR_RETURN(RnnAttrs a, ReadRnn(init, cell));
  return MakeKernel([a](KernelContext& c) { return RunRnn(a, c); });
}

}  // namespace

void AppendRnnKernels(KernelTable& t) {
  t.push_back({"", "RNN", 7, kLatestOpset, MakeRnn<Cell::kRnn>});
  t.push_back({"", "GRU", 7, kLatestOpset, MakeRnn<Cell::kGru>});
  t.push_back({"", "LSTM", 7, kLatestOpset, MakeRnn<Cell::kLstm>});
}

}  // namespace quantkit::runtime
