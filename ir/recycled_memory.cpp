#include "ir/recycled_memory.h"

#include "ir/torch_compat.h"

#include <c10/core/CPUAllocator.h>

namespace ptopt::ir {

namespace {

// The storage's memory, when `t` alone owns it and it is a plain allocation
// of `allocator` (freed by its deleter, the context being the data itself).
bool recyclable(const at::Tensor& t, const c10::Allocator& allocator) {
  if (!t.defined() || !t.device().is_cpu() || t.is_sparse() || t.is_mkldnn() || t.is_quantized() || t.is_nested())
    return false;
  if (t.use_count() != 1 || !t.has_storage()) return false;
  const c10::Storage& storage = t.storage();
  if (storage.use_count() != 1 || storage.nbytes() < kRecycledMinBytes) return false;
  const c10::DataPtr& data = storage.data_ptr();
  return data.get() != nullptr && data.get() == data.get_context() &&
         data.get_deleter() == allocator.raw_deleter() && data.device().is_cpu();
}

}  // namespace

RecycledMemory::RecycledMemory(ConstantTable& constants) {
  c10::Allocator* current = c10::GetCPUAllocator();
  if (!current || !current->raw_deleter()) return;  // not a plain allocator: nothing to hand on
  self_ = compat::makeCpuAllocator([this](size_t n) { return allocate(n); }, current->raw_deleter());
  c10::SetCPUAllocator(self_.get());
  if (c10::GetCPUAllocator() != self_.get()) return;  // one of a higher priority stays: nothing taken
  replaced_ = current;
  for (const auto& [name, value] : constants.entries()) {
    if (!value.isTensor()) continue;
    const at::Tensor& t = value.toTensor();
    if (!recyclable(t, *replaced_)) continue;
    c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    const size_t bytes = storage->nbytes();
    c10::DataPtr block = storage->set_data_ptr(c10::DataPtr(nullptr, t.device()));
    storage->set_nbytes(0);
    held_ += bytes;
    blocks_.emplace(bytes, std::move(block));
  }
  if (blocks_.empty()) {  // nothing to hand on: LibTorch's allocator back at once
    c10::SetCPUAllocator(replaced_);
    replaced_ = nullptr;
  }
}

RecycledMemory::~RecycledMemory() {
  if (replaced_) c10::SetCPUAllocator(replaced_);
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_.clear();  // each freed by the replaced allocator's deleter
}

c10::DataPtr RecycledMemory::allocate(size_t n) {
  if (n >= kRecycledMinBytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.lower_bound(n);
    if (it != blocks_.end() && it->first - n <= n / 8) {
      c10::DataPtr block = std::move(it->second);
      held_ -= it->first;
      handedOut_ += it->first;
      blocks_.erase(it);
      return block;
    }
  }
  return replaced_->allocate(n);
}

size_t RecycledMemory::heldBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_;
}

size_t RecycledMemory::handedOutBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return handedOut_;
}

}  // namespace ptopt::ir
