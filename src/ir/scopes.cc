#include "ir/scopes.h"

#include "common/check.h"

namespace quantkit::ir {

std::string SubgraphScope(const std::string& parent, const Node& node,
                          const std::string& attribute) {
  // Exporters leave control-flow nodes unnamed at times; the first output name is unique (SSA).
  std::string key = node.name;
  if (key.empty()) key = "<" + (node.output(0) ? node.output(0)->name() : std::string()) + ">";
  key += "." + attribute;
  return parent.empty() ? key : parent + kScopeSeparator + key;
}

std::string QualifiedName(const std::string& scope, const std::string& name) {
  return scope.empty() ? name : scope + kScopeSeparator + name;
}

std::unordered_map<const Graph*, std::string> GraphScopes(const Graph& graph) {
  std::unordered_map<const Graph*, std::string> scopes;
  ForEachScopedGraph(graph,
                     [&](const Graph& g, const std::string& scope) { scopes.emplace(&g, scope); });
  return scopes;
}

const Value* ResolveCapture(const Value* v) {
  while (v != nullptr && v->is_outer_scope()) {
    const Graph* parent = v->owner() ? v->owner()->parent() : nullptr;
    v = parent ? parent->FindValue(v->name()) : nullptr;
  }
  return v;
}

const Value* FindQualifiedValue(const Graph& graph, const std::string& name) {
  if (const Value* v = graph.FindValue(name)) return v;
  if (name.find(kScopeSeparator) == std::string::npos) return nullptr;
  const Value* found = nullptr;
  ForEachScopedGraph(graph, [&](const Graph& g, const std::string& scope) {
    const std::string prefix = scope + kScopeSeparator;
    if (found || scope.empty() || name.compare(0, prefix.size(), prefix) != 0) return;
    const Value* v = g.FindValue(name.substr(prefix.size()));
    if (v && !v->is_outer_scope()) found = v;
  });
  return found;
}

Status CheckScopeNames(const Graph& graph) {
  bool has_bodies = false;
  ForEachScopedGraph(graph,
                     [&](const Graph&, const std::string& scope) { has_bodies |= !scope.empty(); });
  if (!has_bodies) return Status::Ok();
  std::unordered_map<std::string, bool> qualified;
  ForEachScopedGraph(graph, [&](const Graph& g, const std::string& scope) {
    if (scope.empty()) return;
    for (const Value* v : g.values()) {
      if (!v->is_outer_scope()) qualified.emplace(QualifiedName(scope, v->name()), true);
    }
  });
  for (const Value* v : graph.values()) {
    QK_RETURN_IF_NOT(!qualified.count(v->name()), StatusCode::kInvalidModel,
                     "tensor '{}' of the main graph is named like a tensor of a control-flow body "
                     "(ir/scopes.h); rename it",
                     v->name());
  }
  return Status::Ok();
}

}  // namespace quantkit::ir
