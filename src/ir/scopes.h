// Names for the tensors of If/Loop/Scan bodies, shared by the interpreter (which reports them to
// observers), Q/DQ placement (which keys a body's sites by them) and the plan (whose entries
// carry them).
//
//   scope(body)          = key(node) + "." + attribute                  for a body of the main
//   graph
//                        = scope(parent) + "::" + key(node) + "." + attribute   for a nested body
//   key(node)            = the node's name, or "<" + its first output's name + ">" when unnamed
//   QualifiedName(s, t)  = t                  when s is "" (the main graph)
//                        = s + "::" + t       otherwise
//
// e.g. "/If.then_branch::/conv/Conv_output_0". The names depend only on the model's names, so
// they are the same in every run and every process (statistics files and plans made from one
// model agree). A tensor a body captures from an enclosing graph is named in the scope of the
// graph that defines it (ResolveCapture): it is one tensor, observed where it is produced.
// A main-graph name that spells a qualified name would collide: CheckScopeNames refuses it.
#pragma once

#include <string>
#include <unordered_map>

#include "ir/graph.h"
#include "quantkit/status.h"

namespace quantkit::ir {

inline constexpr char kScopeSeparator[] = "::";

// Scope of the body held by attribute `attribute` of `node`, inside the graph of scope `parent`.
std::string SubgraphScope(const std::string& parent, const Node& node,
                          const std::string& attribute);

std::string QualifiedName(const std::string& scope, const std::string& name);

// The scope of `graph` and of every body below it ("" for `graph` itself).
std::unordered_map<const Graph*, std::string> GraphScopes(const Graph& graph);

// The value `v` stands for: itself, or, for a capture (is_outer_scope), the value of that name
// in the nearest enclosing graph that defines it. nullptr when no enclosing graph does.
const Value* ResolveCapture(const Value* v);

// The value a plan key names: a main-graph name, or a qualified name of a body's value (not a
// capture). nullptr when none.
const Value* FindQualifiedValue(const Graph& graph, const std::string& name);

// Calls fn(graph, scope) for `root` and every body below it, parents before children.
template <typename Fn>
void ForEachScopedGraph(const Graph& root, Fn&& fn, const std::string& scope = "") {
  fn(root, scope);
  for (const Node* node : root.nodes()) {
    for (const Attribute& attr : node->attributes()) {
      for (const auto& sub : attr.graphs)
        ForEachScopedGraph(*sub, fn, SubgraphScope(scope, *node, attr.name));
    }
  }
}

// kInvalidModel when a value of `graph` is named like a body tensor (it would share a plan entry
// and statistics with it).
Status CheckScopeNames(const Graph& graph);

}  // namespace quantkit::ir
