// Recycled memory: the pages of tensors about to be freed, handed to the next
// CPU allocations of the same size.
//
// Fresh memory is not free. The kernel maps each 4 KiB page the first time it
// is touched, and on a VM that costs about 0.6 s per GB, as much as reading
// the bytes back from the page cache. After writing OUT, the driver frees the
// IR (its folded weights) and at once loads the written file back, which
// allocates the same sizes again: recycling hands the load the freed pages,
// already mapped (a 1 GB model's load back: 0.5 s less).
//
// RecycledMemory(constants) takes the memory of each tensor in the table
// that the table alone owns (one reference to the tensor, one to its
// storage), of at least kRecycledMinBytes, allocated by the current CPU
// allocator with that allocator's own deleter (not a view into a file, not
// from_blob, not copy-on-write). The tensors are left empty: the caller is
// about to free them. While the object lives it is LibTorch's CPU allocator:
// an allocation of a size it holds (up to 1/8 larger) gets a held block, any
// other goes to the allocator it replaced. Its destructor puts that allocator
// back and frees the blocks nobody took.
//
// Every block it hands out is a plain allocation of the replaced allocator,
// with that allocator's deleter, so it is freed as usual by whoever ends up
// owning it; another thread allocating meanwhile only gets such blocks too.
// Where the CPU allocator cannot be replaced (one installed at a higher
// priority) or is not a plain one (no raw deleter), nothing is taken. Only one RecycledMemory may live at a time.
#pragma once

#include "ir/ir.h"

#include <c10/core/Allocator.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace ptopt::ir {

inline constexpr size_t kRecycledMinBytes = size_t{1} << 20;

class RecycledMemory {
 public:
  explicit RecycledMemory(ConstantTable& constants);
  ~RecycledMemory();
  RecycledMemory(const RecycledMemory&) = delete;
  RecycledMemory& operator=(const RecycledMemory&) = delete;

  size_t heldBytes() const;      // taken and not handed out yet
  size_t handedOutBytes() const;  // handed to allocations so far

 private:
  c10::DataPtr allocate(size_t n);

  c10::Allocator* replaced_ = nullptr;
  std::unique_ptr<c10::Allocator> self_;
  mutable std::mutex mutex_;
  std::multimap<size_t, c10::DataPtr> blocks_;  // by size in bytes
  size_t held_ = 0, handedOut_ = 0;
};

}  // namespace ptopt::ir
