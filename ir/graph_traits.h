// Boost.Graph view of one IR Block, over the IR itself (no copy).
//
// Vertices are the nodes of the block. There is an edge u -> v for every use
// of an output of u by v, where a use inside a nested block of v counts as a
// use by v (its ancestor in this block). So BGL algorithms see the data
// dependencies that constrain the order of the block's nodes. The block is
// modelled as a VertexListGraph and IncidenceGraph; `topologicalOrder` wraps
// boost::topological_sort for callers.
#pragma once

#include "ir/ir.h"

#include <boost/graph/graph_traits.hpp>
#include <boost/iterator/iterator_facade.hpp>

#include <vector>

namespace ptopt::ir {

struct BlockEdge {
  Node* source = nullptr;
  Node* target = nullptr;
  size_t outputIndex = 0;  // which output of source
  size_t useIndex = 0;     // which use of that output
  bool operator==(const BlockEdge& o) const {
    return source == o.source && outputIndex == o.outputIndex && useIndex == o.useIndex;
  }
  bool operator!=(const BlockEdge& o) const { return !(*this == o); }
};

// Out-edges of one node: walks outputs and their uses, skipping uses that do
// not lie inside the block (there are none in valid IR).
class BlockOutEdgeIterator
    : public boost::iterator_facade<BlockOutEdgeIterator, BlockEdge, boost::forward_traversal_tag,
                                    BlockEdge> {
 public:
  BlockOutEdgeIterator() = default;
  BlockOutEdgeIterator(const Block* b, Node* n, bool atEnd)
      : block_(b), node_(n), output_(atEnd ? n->numOutputs() : 0) {
    settle();
  }

 private:
  friend class boost::iterator_core_access;
  BlockEdge dereference() const {
    const Use& u = node_->output(output_)->uses()[use_];
    return {node_, u.user->ancestorIn(block_), output_, use_};
  }
  bool equal(const BlockOutEdgeIterator& o) const {
    return node_ == o.node_ && output_ == o.output_ && use_ == o.use_;
  }
  void increment() { ++use_; settle(); }
  // Moves to the next valid (output, use) position or to the end.
  void settle() {
    while (output_ < node_->numOutputs()) {
      const auto& uses = node_->output(output_)->uses();
      while (use_ < uses.size() && !uses[use_].user->ancestorIn(block_)) ++use_;
      if (use_ < uses.size()) return;
      ++output_;
      use_ = 0;
    }
    use_ = 0;
  }

  const Block* block_ = nullptr;
  Node* node_ = nullptr;
  size_t output_ = 0;
  size_t use_ = 0;
};

// The nodes of the block in order (the vertex list).
class BlockVertexIterator
    : public boost::iterator_facade<BlockVertexIterator, Node*, boost::forward_traversal_tag, Node*> {
 public:
  BlockVertexIterator() = default;
  explicit BlockVertexIterator(Node* n) : n_(n) {}

 private:
  friend class boost::iterator_core_access;
  Node* dereference() const { return n_; }
  bool equal(const BlockVertexIterator& o) const { return n_ == o.n_; }
  void increment() { n_ = n_->next(); }
  Node* n_ = nullptr;
};

// Nodes of `b` in a dependency order (boost::topological_sort). Throws
// boost::not_a_dag when the uses form a cycle.
std::vector<Node*> topologicalOrder(const Block& b);

}  // namespace ptopt::ir

namespace boost {

template <>
struct graph_traits<ptopt::ir::Block> {
  using vertex_descriptor = ptopt::ir::Node*;
  using edge_descriptor = ptopt::ir::BlockEdge;
  using directed_category = directed_tag;
  using edge_parallel_category = allow_parallel_edge_tag;
  struct traversal_category : vertex_list_graph_tag, incidence_graph_tag {};
  using vertex_iterator = ptopt::ir::BlockVertexIterator;
  using out_edge_iterator = ptopt::ir::BlockOutEdgeIterator;
  using vertices_size_type = std::size_t;
  using edges_size_type = std::size_t;
  using degree_size_type = std::size_t;
  static vertex_descriptor null_vertex() { return nullptr; }
};

}  // namespace boost

namespace ptopt::ir {

inline std::pair<BlockVertexIterator, BlockVertexIterator> vertices(const Block& b) {
  return {BlockVertexIterator(b.first()), BlockVertexIterator(nullptr)};
}
inline std::size_t num_vertices(const Block& b) { return b.size(); }
inline std::pair<BlockOutEdgeIterator, BlockOutEdgeIterator> out_edges(Node* n, const Block& b) {
  return {BlockOutEdgeIterator(&b, n, false), BlockOutEdgeIterator(&b, n, true)};
}
inline std::size_t out_degree(Node* n, const Block& b) {
  auto [first, last] = out_edges(n, b);
  return static_cast<std::size_t>(std::distance(first, last));
}
inline Node* source(const BlockEdge& e, const Block&) { return e.source; }
inline Node* target(const BlockEdge& e, const Block&) { return e.target; }

}  // namespace ptopt::ir
