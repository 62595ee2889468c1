// The quantkit graph IR: Model -> Graph -> Node / Value, with use-def links kept consistent by
// the mutation helpers below. Mirrors ONNX closely (same vocabulary, same numbering of dtypes and
// attribute types) so import/export is lossless; no protobuf types appear here.
//
// Ownership: a Graph owns its Nodes and Values. Subgraphs (If/Loop/Scan bodies) are owned by the
// Attribute that holds them. A name used in a subgraph but defined in an enclosing graph becomes a
// local Value marked is_outer_scope (a capture), so every graph is self-contained.
//
// Mutate only through Graph's helpers (AddNode, SetNodeInput, ReplaceAllUsesWith, RemoveNode...):
// they update producers and uses together. ir::Verify checks the invariants after a pass.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "ir/tensor.h"
#include "quantkit/status.h"

namespace quantkit::ir {

class Graph;
class Node;

using StringPairs = std::vector<std::pair<std::string, std::string>>;

// One dimension: a known size (value >= 0), a named symbolic size (param), or unknown.
struct Dim {
  int64_t value = -1;
  std::string param;
  std::string denotation;
  bool is_known() const { return value >= 0; }
  bool is_symbolic() const { return value < 0 && !param.empty(); }
  static Dim Known(int64_t v) { return Dim{v, {}, {}}; }
  static Dim Symbolic(std::string p) { return Dim{-1, std::move(p), {}}; }
  bool operator==(const Dim& o) const { return value == o.value && param == o.param; }
};

struct TypeInfo {
  enum class Kind { kNone, kTensor, kSparseTensor, kOther };
  Kind kind = Kind::kNone;
  DType dtype = DType::kUndefined;  // kTensor / kSparseTensor
  bool has_shape = false;           // rank known
  std::vector<Dim> dims;            // valid when has_shape
  std::string denotation;
  // kOther (sequence, map, optional, opaque): the serialized TypeProto, kept verbatim.
  std::string opaque;

  static TypeInfo Tensor(DType dtype, std::vector<Dim> dims) {
    TypeInfo t;
    t.kind = Kind::kTensor;
    t.dtype = dtype;
    t.has_shape = true;
    t.dims = std::move(dims);
    return t;
  }
  bool is_tensor() const { return kind == Kind::kTensor; }
  // Dims as integers (-1 for unknown/symbolic); empty optional when the rank is unknown.
  std::optional<std::vector<int64_t>> ConcreteDims() const;
  // "float[N,3,224,224]"-style rendering for messages and `inspect`.
  std::string ToString() const;
};

struct SparseTensor {
  Tensor values;   // 1-D [NNZ]
  Tensor indices;  // [NNZ] linearized or [NNZ, rank]
  std::vector<int64_t> dims;
};

// Numbered as ONNX AttributeProto.AttributeType.
enum class AttrType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kInt = 2,
  kString = 3,
  kTensor = 4,
  kGraph = 5,
  kFloats = 6,
  kInts = 7,
  kStrings = 8,
  kTensors = 9,
  kGraphs = 10,
  kSparseTensor = 11,
  kSparseTensors = 12,
  kTypeProto = 13,
  kTypeProtos = 14,
};

// Move-only: a graph attribute owns its subgraph.
struct Attribute {
  Attribute() = default;
  Attribute(Attribute&&) = default;
  Attribute& operator=(Attribute&&) = default;
  Attribute(const Attribute&) = delete;
  Attribute& operator=(const Attribute&) = delete;

  static Attribute Int(std::string name, int64_t v);
  static Attribute Float(std::string name, float v);
  static Attribute String(std::string name, std::string v);
  static Attribute Ints(std::string name, std::vector<int64_t> v);
  static Attribute Floats(std::string name, std::vector<float> v);
  static Attribute TensorValue(std::string name, Tensor v);

  std::string name;
  AttrType type = AttrType::kUndefined;
  std::string doc_string;
  std::string ref_attr_name;  // inside function bodies
  float f = 0.0f;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::unique_ptr<Graph>> graphs;  // kGraph holds exactly one
  std::vector<SparseTensor> sparse_tensors;    // kSparseTensor holds exactly one
  std::vector<std::string> type_protos;        // serialized TypeProto(s), kept verbatim

  Graph* graph() const { return graphs.empty() ? nullptr : graphs.front().get(); }
};

struct Use {
  Node* node = nullptr;
  int input_index = 0;
  bool operator==(const Use& o) const { return node == o.node && input_index == o.input_index; }
};

class Value {
 public:
  const std::string& name() const { return name_; }
  Graph* owner() const { return owner_; }
  Node* producer() const { return producer_; }
  int producer_output() const { return producer_output_; }
  const std::vector<Use>& uses() const { return uses_; }

  bool is_graph_input() const { return is_graph_input_; }
  bool is_graph_output() const;
  bool is_initializer() const { return initializer.has_value() || sparse_initializer != nullptr; }
  bool is_outer_scope() const { return is_outer_scope_; }
  // A constant is an initializer that is not also a graph input (an input may be overridden).
  bool is_constant() const { return is_initializer() && !is_graph_input_; }

  TypeInfo type;
  bool has_value_info = false;  // type was declared in the model's value_info
  std::string doc_string;
  std::optional<Tensor> initializer;
  std::shared_ptr<SparseTensor> sparse_initializer;
  StringPairs metadata_props;  // ValueInfoProto.metadata_props (IR 10)

 private:
  friend class Graph;
  std::string name_;
  Graph* owner_ = nullptr;
  Node* producer_ = nullptr;
  int producer_output_ = -1;
  std::vector<Use> uses_;
  bool is_graph_input_ = false;
  bool is_outer_scope_ = false;
};

class Node {
 public:
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }
  Graph* owner() const { return owner_; }
  // Inputs/outputs; nullptr marks an omitted optional input or output (ONNX name "").
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }

  std::vector<Attribute>& attributes() { return attributes_; }
  const std::vector<Attribute>& attributes() const { return attributes_; }
  const Attribute* attr(const std::string& name) const;
  Attribute* mutable_attr(const std::string& name);
  bool has_attr(const std::string& name) const { return attr(name) != nullptr; }
  int64_t GetInt(const std::string& name, int64_t fallback) const;
  float GetFloat(const std::string& name, float fallback) const;
  std::string GetString(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> GetInts(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> GetFloats(const std::string& name, std::vector<float> fallback = {}) const;
  // Replaces or adds an attribute by name.
  void SetAttr(Attribute attr);

  // "node 'conv1' (Conv)" for messages.
  std::string Describe() const;

  std::string name;
  std::string doc_string;
  std::string overload;  // IR 10
  StringPairs metadata_props;

 private:
  friend class Graph;
  std::string op_type_;
  std::string domain_;
  Graph* owner_ = nullptr;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Attribute> attributes_;
};

class Graph {
 public:
  explicit Graph(Graph* parent = nullptr) : parent_(parent) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Graph* parent() const { return parent_; }
  void set_parent(Graph* parent) { parent_ = parent; }

  // --- values ---
  Value* FindValue(const std::string& name) const;
  // Creates a new value; the name must be unused in this graph (checked: returns nullptr if not).
  Value* CreateValue(const std::string& name);
  // Returns the existing value or creates it.
  Value* GetOrCreateValue(const std::string& name);
  // Marks a value as captured from an enclosing graph.
  void MarkOuterScope(Value* v) { v->is_outer_scope_ = true; }
  // A name not used in this graph (or its ancestors): prefix, prefix_1, prefix_2...
  std::string UniqueValueName(const std::string& prefix) const;
  std::string UniqueNodeName(const std::string& prefix) const;
  Status RenameValue(Value* v, const std::string& new_name);
  // Values in creation order.
  std::vector<Value*> values() const;
  // Removes a value that has no producer, no uses and is not a graph input/output.
  Status RemoveValue(Value* v);

  // --- graph inputs, outputs, initializers ---
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  void AddInput(Value* v);
  void AddOutput(Value* v);
  void SetOutput(size_t i, Value* v);
  void RemoveInput(Value* v);
  void ClearOutputs() { outputs_.clear(); }
  // Creates (or reuses) a value holding `tensor` as an initializer.
  Value* AddInitializer(const std::string& name, Tensor tensor);
  // Same for a sparse initializer (a dense value stored sparsely); keeps the shared order so
  // export writes initializers and sparse initializers as they were added.
  Value* AddSparseInitializer(const std::string& name, std::shared_ptr<SparseTensor> tensor);
  // Initializer values in the order they were added (export order).
  std::vector<Value*> initializers() const;
  std::vector<Value*> sparse_initializers() const;

  // --- nodes ---
  // Appends a node. inputs may contain nullptr (omitted optional). Output values are created from
  // output_names ("" gives an omitted output); each name must be new in this graph.
  Result<Node*> AddNode(const std::string& op_type, const std::vector<Value*>& inputs,
                        const std::vector<std::string>& output_names,
                        const std::string& domain = "", const std::string& name = "");
  // Same, inserted just before `pos` in node order.
  Result<Node*> InsertNodeBefore(Node* pos, const std::string& op_type,
                                 const std::vector<Value*>& inputs,
                                 const std::vector<std::string>& output_names,
                                 const std::string& domain = "", const std::string& name = "");
  void SetNodeInput(Node* node, size_t index, Value* v);  // grows inputs if index == size
  void AppendNodeInput(Node* node, Value* v) { SetNodeInput(node, node->inputs_.size(), v); }
  // Re-points every use of `from` (node inputs and graph outputs) to `to`.
  void ReplaceAllUsesWith(Value* from, Value* to);
  // Removes a node whose outputs are unused and are not graph outputs; the outputs are deleted.
  Status RemoveNode(Node* node);
  // Bypasses a node: uses of output `output_index` are pointed at input `input_index`, then the
  // node is removed (its other outputs must be unused).
  Status RemoveNodeAndReconnect(Node* node, size_t input_index, size_t output_index);

  std::vector<Node*> nodes() const;  // stored order
  size_t num_nodes() const { return nodes_.size(); }
  // Kahn's algorithm, stable with respect to stored order. Fails naming a node on a cycle.
  Result<std::vector<Node*>> TopologicalOrder() const;
  // Reorders the stored nodes topologically.
  Status SortTopologically();

  std::string name;
  std::string doc_string;
  StringPairs metadata_props;
  std::vector<std::string> quantization_annotations;  // serialized TensorAnnotation, verbatim

 private:
  Value* NewValue(const std::string& name);
  void RemoveUse(Value* v, Node* node, int index);
  Result<Node*> MakeNode(const std::string& op_type, const std::vector<Value*>& inputs,
                         const std::vector<std::string>& output_names, const std::string& domain,
                         const std::string& name);
  bool NameTakenInScope(const std::string& name) const;

  Graph* parent_ = nullptr;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> value_storage_;
  std::unordered_map<std::string, Value*> values_by_name_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> initializer_order_;
};

struct OpsetImport {
  std::string domain;  // "" is the default ONNX domain ("ai.onnx" is normalised to "")
  int64_t version = 0;
};

struct Model {
  int64_t ir_version = 8;
  std::vector<OpsetImport> opset_imports;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  StringPairs metadata_props;
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  std::vector<std::string> functions;      // serialized FunctionProto, passed through verbatim
  std::vector<std::string> training_info;  // serialized TrainingInfoProto, passed through verbatim
  std::string source_path;                 // file it was read from ("" when built in memory)

  // Opset version imported for a domain ("" / "ai.onnx" = default); -1 when not imported.
  int64_t OpsetFor(const std::string& domain) const;
  void SetOpset(const std::string& domain, int64_t version);
};

// Invokes fn(graph) on `graph` and every subgraph below it, depth first.
template <typename Fn>
void ForEachGraph(Graph& graph, Fn&& fn);

// Normalises "ai.onnx" to "".
std::string CanonicalDomain(const std::string& domain);

}  // namespace quantkit::ir

#include "ir/graph_inl.h"
