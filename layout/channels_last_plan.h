// channels-last's analysis (the contract is layout/channels_last.h's): the
// convs that anchor regions, the values and nodes that go channels-last with
// them, and which regions are converted (regions=, and mode=auto's rules).
// Internal to layout/: the pass and channelsLastRegions read it.
#pragma once

#include "ir/ir.h"
#include "ir/mutation.h"
#include "ir/op_views.h"
#include "rewriters/pass.h"

#include <ATen/Tensor.h>

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ptopt::layout::nhwc {

c10::MemoryFormat channelsLastFor(int64_t rank);
// The permutations from NCHW (NCDHW) to NHWC (NDHWC) and back.
std::vector<int64_t> toNhwc(int64_t rank);
std::vector<int64_t> toNchw(int64_t rank);
// `aten::contiguous(x, memory_format=<literal>)`, as this pass inserts them.
std::optional<ir::LayoutOp> conversion(ir::Node* n);
// `aten::permute(x, dims=<literal>)`.
std::optional<ir::LayoutOp> permute(ir::Node* n);

// An anchor: a conv in the top-level block with a constant 4-D/5-D weight.
struct Anchor {
  ir::Node* node;
  int64_t rank;
  at::Tensor weight;
  int64_t groups;
  bool transposed;
  size_t inputIndex, weightIndex;
};

struct Analysis {
  std::unordered_map<const ir::Value*, int64_t> region;        // channels-last values and their rank
  std::unordered_set<const ir::Node*> clNodes;                  // nodes computing in channels-last
  std::set<std::pair<const ir::Node*, size_t>> regionDataUses;  // (user, arg) reading a region value as such
  std::vector<std::pair<ir::Node*, size_t>> entries;            // (user, arg) converted to channels-last
  std::unordered_set<const ir::Node*> sources;                  // permutes back to NCHW that start a region
  std::unordered_set<const ir::Node*> freePermutes;             // NCHW -> NHWC permutes left as views
};

struct RegionStats {
  int64_t convs = 0;
  int64_t largeConvs = 0;          // more than 16 input or output channels
  double macs = 0, groupedMacs = 0;
  std::optional<int64_t> maxOutputArea;
  std::vector<const Anchor*> anchors;
  std::vector<const ir::Node*> sources;
  std::vector<const ir::Node*> nodes;  // every channels-last node of the region
  std::string id;                      // the result name of its first conv (Plan)
};

// Why auto mode declines a region, or "" when channels-last pays.
std::string autoDecline(const RegionStats& s);

// Which regions to convert, and the analysis the rewrite follows.
struct Plan {
  std::vector<Anchor> anchors;  // not resized once `selected` points into it
  std::unordered_map<const ir::Node*, const Anchor*> selected;
  std::unordered_set<const ir::Value*> pinned;
  Analysis a;
  std::vector<RegionStats> regions;  // the regions converted, in program order of their first conv
};

// Finds the anchors (declining the others), analyses, and drops the regions
// that have no conv, that regions= does not name (`listed`, when given) or,
// in mode=auto, that do not pay; then re-analyses without them until
// nothing more drops. Declines and counters go to `ctx` and `r`.
Plan plan(ir::Graph& graph, rewriters::PassContext& ctx, const std::string& pass, const std::string& mode,
          const std::optional<std::set<std::string>>& listed, const ir::MutationAnalysis& mutation,
          rewriters::PassResult& r);

}  // namespace ptopt::layout::nhwc
