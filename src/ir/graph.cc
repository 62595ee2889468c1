#include "ir/graph.h"

#include <algorithm>
#include <queue>
#include <unordered_set>

#include "common/check.h"

namespace quantkit::ir {

std::string CanonicalDomain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

// ---------------------------------------------------------------- TypeInfo

std::optional<std::vector<int64_t>> TypeInfo::ConcreteDims() const {
  if (kind != Kind::kTensor || !has_shape) return std::nullopt;
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const Dim& d : dims) out.push_back(d.is_known() ? d.value : -1);
  return out;
}

std::string TypeInfo::ToString() const {
  switch (kind) {
    case Kind::kNone:
      return "?";
    case Kind::kOther:
      return "non-tensor";
    case Kind::kTensor:
    case Kind::kSparseTensor:
      break;
  }
  std::string s =
      std::string(kind == Kind::kSparseTensor ? "sparse " : "") + std::string(DTypeName(dtype));
  if (!has_shape) return s + "[?]";
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    if (dims[i].is_known()) {
      s += std::to_string(dims[i].value);
    } else if (dims[i].is_symbolic()) {
      s += dims[i].param;
    } else {
      s += "?";
    }
  }
  return s + "]";
}

// ---------------------------------------------------------------- Attribute

Attribute Attribute::Int(std::string n, int64_t v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::kInt;
  a.i = v;
  return a;
}
Attribute Attribute::Float(std::string n, float v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::kFloat;
  a.f = v;
  return a;
}
Attribute Attribute::String(std::string n, std::string v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::kString;
  a.s = std::move(v);
  return a;
}
Attribute Attribute::Ints(std::string n, std::vector<int64_t> v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::kInts;
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::Floats(std::string n, std::vector<float> v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::kFloats;
  a.floats = std::move(v);
  return a;
}
Attribute Attribute::TensorValue(std::string n, Tensor v) {
  Attribute a;
  a.name = std::move(n);
  a.type = AttrType::kTensor;
  a.t = std::move(v);
  return a;
}

// ---------------------------------------------------------------- Value / Node

bool Value::is_graph_output() const {
  if (!owner_) return false;
  const auto& outs = owner_->outputs();
  return std::find(outs.begin(), outs.end(), this) != outs.end();
}

const Attribute* Node::attr(const std::string& attr_name) const {
  for (const Attribute& a : attributes_) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

Attribute* Node::mutable_attr(const std::string& attr_name) {
  for (Attribute& a : attributes_) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

int64_t Node::GetInt(const std::string& n, int64_t fallback) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kInt ? a->i : fallback;
}
float Node::GetFloat(const std::string& n, float fallback) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kFloat ? a->f : fallback;
}
std::string Node::GetString(const std::string& n, const std::string& fallback) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kString ? a->s : fallback;
}
std::vector<int64_t> Node::GetInts(const std::string& n, std::vector<int64_t> fallback) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kInts ? a->ints : fallback;
}
std::vector<float> Node::GetFloats(const std::string& n, std::vector<float> fallback) const {
  const Attribute* a = attr(n);
  return a && a->type == AttrType::kFloats ? a->floats : fallback;
}

void Node::SetAttr(Attribute a) {
  for (Attribute& existing : attributes_) {
    if (existing.name == a.name) {
      existing = std::move(a);
      return;
    }
  }
  attributes_.push_back(std::move(a));
}

std::string Node::Describe() const {
  std::string s = "node '" + name + "' (";
  if (!domain_.empty()) s += domain_ + "::";
  return s + op_type_ + ")";
}

// ---------------------------------------------------------------- Graph: values

Value* Graph::FindValue(const std::string& value_name) const {
  auto it = values_by_name_.find(value_name);
  return it == values_by_name_.end() ? nullptr : it->second;
}

Value* Graph::NewValue(const std::string& value_name) {
  auto v = std::make_unique<Value>();
  v->name_ = value_name;
  v->owner_ = this;
  Value* raw = v.get();
  value_storage_.push_back(std::move(v));
  values_by_name_[value_name] = raw;
  return raw;
}

Value* Graph::CreateValue(const std::string& value_name) {
  if (value_name.empty() || FindValue(value_name)) return nullptr;
  return NewValue(value_name);
}

Value* Graph::GetOrCreateValue(const std::string& value_name) {
  if (Value* v = FindValue(value_name)) return v;
  return NewValue(value_name);
}

bool Graph::NameTakenInScope(const std::string& n) const {
  for (const Graph* g = this; g; g = g->parent_) {
    if (g->FindValue(n)) return true;
  }
  return false;
}

std::string Graph::UniqueValueName(const std::string& prefix) const {
  if (!NameTakenInScope(prefix)) return prefix;
  for (int i = 1;; ++i) {
    std::string candidate = prefix + "_" + std::to_string(i);
    if (!NameTakenInScope(candidate)) return candidate;
  }
}

std::string Graph::UniqueNodeName(const std::string& prefix) const {
  std::unordered_set<std::string> used;
  for (const auto& n : nodes_) used.insert(n->name);
  if (!used.count(prefix)) return prefix;
  for (int i = 1;; ++i) {
    std::string candidate = prefix + "_" + std::to_string(i);
    if (!used.count(candidate)) return candidate;
  }
}

Status Graph::RenameValue(Value* v, const std::string& new_name) {
  QK_RETURN_IF_NOT(v && v->owner_ == this, StatusCode::kInternal, "RenameValue: foreign value");
  if (new_name == v->name_) return Status::Ok();
  QK_RETURN_IF_NOT(!FindValue(new_name), StatusCode::kInvalidArgument,
                   "cannot rename '{}' to '{}': name already used", v->name_, new_name);
  values_by_name_.erase(v->name_);
  v->name_ = new_name;
  values_by_name_[new_name] = v;
  return Status::Ok();
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> out;
  out.reserve(value_storage_.size());
  for (const auto& v : value_storage_) out.push_back(v.get());
  return out;
}

Status Graph::RemoveValue(Value* v) {
  QK_RETURN_IF_NOT(v && v->owner_ == this, StatusCode::kInternal, "RemoveValue: foreign value");
  QK_RETURN_IF_NOT(
      !v->producer_ && v->uses_.empty() && !v->is_graph_input_ && !v->is_graph_output(),
      StatusCode::kInternal, "RemoveValue: value '{}' is still connected", v->name_);
  initializer_order_.erase(std::remove(initializer_order_.begin(), initializer_order_.end(), v),
                           initializer_order_.end());
  values_by_name_.erase(v->name_);
  value_storage_.erase(std::remove_if(value_storage_.begin(), value_storage_.end(),
                                      [v](const auto& p) { return p.get() == v; }),
                       value_storage_.end());
  return Status::Ok();
}

// ---------------------------------------------------------------- Graph: inputs/outputs

void Graph::AddInput(Value* v) {
  QK_CHECK(v && v->owner_ == this, "AddInput: foreign value");
  if (!v->is_graph_input_) {
    v->is_graph_input_ = true;
    inputs_.push_back(v);
  }
}

void Graph::AddOutput(Value* v) {
  QK_CHECK(v && v->owner_ == this, "AddOutput: foreign value");
  outputs_.push_back(v);
}

void Graph::SetOutput(size_t i, Value* v) {
  QK_CHECK(i < outputs_.size() && v && v->owner_ == this, "SetOutput: bad index or value");
  outputs_[i] = v;
}

void Graph::RemoveInput(Value* v) {
  inputs_.erase(std::remove(inputs_.begin(), inputs_.end(), v), inputs_.end());
  v->is_graph_input_ = false;
}

Value* Graph::AddInitializer(const std::string& value_name, Tensor tensor) {
  Value* v = GetOrCreateValue(value_name);
  tensor.name = value_name;
  if (!v->is_initializer()) initializer_order_.push_back(v);
  if (v->type.kind == TypeInfo::Kind::kNone) {
    std::vector<Dim> dims;
    for (int64_t d : tensor.dims()) dims.push_back(Dim::Known(d));
    v->type = TypeInfo::Tensor(tensor.dtype(), std::move(dims));
  }
  v->initializer = std::move(tensor);
  return v;
}

Value* Graph::AddSparseInitializer(const std::string& value_name,
                                   std::shared_ptr<SparseTensor> tensor) {
  Value* v = GetOrCreateValue(value_name);
  if (!v->is_initializer()) initializer_order_.push_back(v);
  if (v->type.kind == TypeInfo::Kind::kNone) {
    std::vector<Dim> dims;
    for (int64_t d : tensor->dims) dims.push_back(Dim::Known(d));
    v->type = TypeInfo::Tensor(tensor->values.dtype(), std::move(dims));
  }
  v->sparse_initializer = std::move(tensor);
  return v;
}

std::vector<Value*> Graph::initializers() const {
  std::vector<Value*> out;
  for (Value* v : initializer_order_) {
    if (v->initializer.has_value()) out.push_back(v);
  }
  return out;
}

std::vector<Value*> Graph::sparse_initializers() const {
  std::vector<Value*> out;
  for (Value* v : initializer_order_) {
    if (v->sparse_initializer) out.push_back(v);
  }
  return out;
}

// ---------------------------------------------------------------- Graph: nodes

Result<Node*> Graph::MakeNode(const std::string& op_type, const std::vector<Value*>& inputs,
                              const std::vector<std::string>& output_names,
                              const std::string& domain, const std::string& node_name) {
  for (const std::string& out : output_names) {
    if (out.empty()) continue;
    Value* existing = FindValue(out);
    QK_RETURN_IF_NOT(!existing || (!existing->producer_ && !existing->is_graph_input_ &&
                                   !existing->is_initializer()),
                     StatusCode::kInvalidModel,
                     "node '{}' ({}): output '{}' is already defined (values must have exactly "
                     "one producer)",
                     node_name, op_type, out);
  }
  auto node = std::make_unique<Node>();
  node->op_type_ = op_type;
  node->domain_ = CanonicalDomain(domain);
  node->name = node_name;
  node->owner_ = this;
  Node* raw = node.get();
  for (Value* in : inputs) {
    QK_CHECK(in == nullptr || in->owner_ == this, "AddNode: input from another graph");
    raw->inputs_.push_back(in);
    if (in) in->uses_.push_back(Use{raw, static_cast<int>(raw->inputs_.size() - 1)});
  }
  for (const std::string& out : output_names) {
    if (out.empty()) {
      raw->outputs_.push_back(nullptr);
      continue;
    }
    Value* v = GetOrCreateValue(out);
    v->producer_ = raw;
    v->producer_output_ = static_cast<int>(raw->outputs_.size());
    raw->outputs_.push_back(v);
  }
  return Result<Node*>(node.release());
}

Result<Node*> Graph::AddNode(const std::string& op_type, const std::vector<Value*>& inputs,
                             const std::vector<std::string>& output_names,
                             const std::string& domain, const std::string& node_name) {
  QK_ASSIGN_OR_RETURN(Node * node, MakeNode(op_type, inputs, output_names, domain, node_name));
  nodes_.emplace_back(node);
  return node;
}

Result<Node*> Graph::InsertNodeBefore(Node* pos, const std::string& op_type,
                                      const std::vector<Value*>& inputs,
                                      const std::vector<std::string>& output_names,
                                      const std::string& domain, const std::string& node_name) {
  auto it =
      std::find_if(nodes_.begin(), nodes_.end(), [pos](const auto& p) { return p.get() == pos; });
  QK_CHECK(it != nodes_.end(), "InsertNodeBefore: position not in graph");
  const auto index = it - nodes_.begin();
  QK_ASSIGN_OR_RETURN(Node * node, MakeNode(op_type, inputs, output_names, domain, node_name));
  nodes_.insert(nodes_.begin() + index, std::unique_ptr<Node>(node));
  return node;
}

void Graph::RemoveUse(Value* v, Node* node, int index) {
  auto& uses = v->uses_;
  auto it = std::find(uses.begin(), uses.end(), Use{node, index});
  if (it != uses.end()) uses.erase(it);
}

void Graph::SetNodeInput(Node* node, size_t index, Value* v) {
  QK_CHECK(node->owner_ == this && index <= node->inputs_.size(), "SetNodeInput: bad node/index");
  QK_CHECK(v == nullptr || v->owner_ == this, "SetNodeInput: value from another graph");
  if (index == node->inputs_.size()) {
    node->inputs_.push_back(nullptr);
  } else if (Value* old = node->inputs_[index]) {
    RemoveUse(old, node, static_cast<int>(index));
  }
  node->inputs_[index] = v;
  if (v) v->uses_.push_back(Use{node, static_cast<int>(index)});
}

void Graph::ReplaceAllUsesWith(Value* from, Value* to) {
  QK_CHECK(from && to && from->owner_ == this && to->owner_ == this,
           "ReplaceAllUsesWith: bad values");
  if (from == to) return;
  std::vector<Use> uses = from->uses_;
  for (const Use& u : uses) SetNodeInput(u.node, static_cast<size_t>(u.input_index), to);
  for (Value*& out : outputs_) {
    if (out == from) out = to;
  }
}

Status Graph::RemoveNode(Node* node) {
  QK_RETURN_IF_NOT(node && node->owner_ == this, StatusCode::kInternal, "RemoveNode: foreign node");
  for (Value* out : node->outputs_) {
    if (!out) continue;
    QK_RETURN_IF_NOT(out->uses_.empty() && !out->is_graph_output(), StatusCode::kInternal,
                     "RemoveNode: output '{}' of {} is still used", out->name_, node->Describe());
  }
  for (size_t i = 0; i < node->inputs_.size(); ++i) {
    if (node->inputs_[i]) RemoveUse(node->inputs_[i], node, static_cast<int>(i));
  }
  for (Value* out : node->outputs_) {
    if (!out) continue;
    out->producer_ = nullptr;
    QK_RETURN_IF_ERROR(RemoveValue(out));
  }
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(),
                              [node](const auto& p) { return p.get() == node; }),
               nodes_.end());
  return Status::Ok();
}

Status Graph::RemoveNodeAndReconnect(Node* node, size_t input_index, size_t output_index) {
  QK_RETURN_IF_NOT(node && input_index < node->inputs_.size() &&
                       output_index < node->outputs_.size() && node->inputs_[input_index] &&
                       node->outputs_[output_index],
                   StatusCode::kInternal, "RemoveNodeAndReconnect: bad indices");
  ReplaceAllUsesWith(node->outputs_[output_index], node->inputs_[input_index]);
  return RemoveNode(node);
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

Result<std::vector<Node*>> Graph::TopologicalOrder() const {
  std::unordered_map<const Node*, size_t> pending;
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node* n = nodes_[i].get();
    position[n] = i;
    size_t count = 0;
    for (const Value* in : n->inputs_) {
      if (in && in->producer_) ++count;
    }
    pending[n] = count;
  }
  // Min-heap on stored position keeps the order stable for already sorted graphs.
  auto later = [&](const Node* a, const Node* b) { return position[a] > position[b]; };
  std::priority_queue<const Node*, std::vector<const Node*>, decltype(later)> ready(later);
  for (const auto& n : nodes_) {
    if (pending[n.get()] == 0) ready.push(n.get());
  }
  std::vector<Node*> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    const Node* n = ready.top();
    ready.pop();
    order.push_back(const_cast<Node*>(n));
    for (const Value* out : n->outputs_) {
      if (!out) continue;
      for (const Use& u : out->uses_) {
        if (--pending[u.node] == 0) ready.push(u.node);
      }
    }
  }
  if (order.size() != nodes_.size()) {
    for (const auto& n : nodes_) {
      if (pending[n.get()] != 0) {
        return MakeStatus(StatusCode::kInvalidModel, "graph '{}' has a cycle through {}", name,
                          n->Describe());
      }
    }
  }
  return order;
}

Status Graph::SortTopologically() {
  QK_ASSIGN_OR_RETURN(std::vector<Node*> order, TopologicalOrder());
  std::unordered_map<Node*, std::unique_ptr<Node>> owned;
  for (auto& n : nodes_) owned[n.get()] = std::move(n);
  nodes_.clear();
  for (Node* n : order) nodes_.push_back(std::move(owned[n]));
  return Status::Ok();
}

// ---------------------------------------------------------------- Model

int64_t Model::OpsetFor(const std::string& d) const {
  const std::string canonical = CanonicalDomain(d);
  for (const OpsetImport& o : opset_imports) {
    if (CanonicalDomain(o.domain) == canonical) return o.version;
  }
  return -1;
}

void Model::SetOpset(const std::string& d, int64_t version) {
  const std::string canonical = CanonicalDomain(d);
  for (OpsetImport& o : opset_imports) {
    if (CanonicalDomain(o.domain) == canonical) {
      o.version = version;
      return;
    }
  }
  opset_imports.push_back(OpsetImport{canonical, version});
}

}  // namespace quantkit::ir
