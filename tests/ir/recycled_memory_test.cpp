// RecycledMemory (ir/recycled_memory.h): a freed weight's pages go to the next
// CPU allocation of its size, the load back of a written model among them;
// nothing another owner still reads is taken; LibTorch's allocator is put
// back afterwards.
#include "ir/model.h"
#include "ir/recycled_memory.h"

#include <c10/core/CPUAllocator.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <vector>

using namespace ptopt;

namespace {

// A tensor of `bytes` that only `table` owns, and its data pointer.
void* ownedOnlyBy(ir::ConstantTable& table, const std::string& name, int64_t bytes) {
  at::Tensor t = at::rand({bytes / 4});
  void* data = t.data_ptr();
  table.set(name, t);
  return data;
}

}  // namespace

TEST_CASE("recycled memory: a weight only the table owns goes to the next allocation of its size") {
  c10::Allocator* before = c10::GetCPUAllocator();
  ir::ConstantTable table;
  void* weight = ownedOnlyBy(table, "weight", 4 << 20);
  ownedOnlyBy(table, "small", 4096);                      // under kRecycledMinBytes: not taken
  at::Tensor shared = at::rand({1 << 20});                // another owner reads it: not taken
  table.set("shared", shared);
  std::vector<float> outside(1 << 20, 1.0f);              // memory LibTorch does not own: not taken
  table.set("blob", at::from_blob(outside.data(), {1 << 20}));
  const at::Tensor sharedCopy = shared.clone();

  at::Tensor reused, fresh;
  {
    ir::RecycledMemory recycled(table);
    CHECK(recycled.heldBytes() == (4u << 20));
    CHECK(c10::GetCPUAllocator() != before);
    CHECK(table.tensor("weight").storage().nbytes() == 0);  // left empty: its owner is about to free it
    reused = at::empty({1 << 20});                           // 4 MiB of float
    CHECK(reused.data_ptr() == weight);
    CHECK(recycled.handedOutBytes() == (4u << 20));
    CHECK(recycled.heldBytes() == 0);
    fresh = at::empty({1 << 20});
    CHECK(fresh.data_ptr() != weight);
  }
  CHECK(c10::GetCPUAllocator() == before);
  // Everything else is as it was, and the handed-out block is an ordinary allocation.
  CHECK(table.tensor("small").storage().nbytes() == 4096);
  CHECK(at::equal(table.tensor("shared"), sharedCopy));
  CHECK(table.tensor("blob").data_ptr() == outside.data());
  reused.fill_(2.0f);
  CHECK(reused.sum().item<double>() == Approx(2.0 * (1 << 20)));
  reused.reset();  // freed by LibTorch's own deleter
}

TEST_CASE("recycled memory: with nothing to take, LibTorch's allocator stays in place") {
  c10::Allocator* before = c10::GetCPUAllocator();
  ir::ConstantTable table;
  ownedOnlyBy(table, "small", 4096);
  ir::RecycledMemory recycled(table);
  CHECK(recycled.heldBytes() == 0);
  CHECK(c10::GetCPUAllocator() == before);
}

TEST_CASE("recycled memory: a block is handed out only up to 1/8 larger than asked, the rest is freed") {
  ir::ConstantTable table;
  void* weight = ownedOnlyBy(table, "weight", 8 << 20);
  ir::RecycledMemory recycled(table);
  at::Tensor half = at::empty({1 << 20});  // 4 MiB asked, 8 MiB held: too wasteful
  CHECK(half.data_ptr() != weight);
  at::Tensor close = at::empty({(8 << 20) / 4 - 1024});  // 4 KiB less than held: taken
  CHECK(close.data_ptr() == weight);
}

TEST_CASE("recycled memory: the load back of a written module gets the freed weights' pages") {
  const auto dir = std::filesystem::temp_directory_path() / "ptopt_recycled_memory_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.pt").string();
  {
    torch::jit::Module m("M");
    m.register_buffer("w", at::rand({1024, 1024}));
    m.define("def forward(self, x):\n  return x + self.w\n");
    m.save(path);
  }
  torch::jit::Module loaded = torch::jit::load(path);
  ir::Model model = ir::importModule(loaded);
  loaded = torch::jit::Module();  // the IR alone owns the weight now, as after a fold
  const std::string name = model.constants->entries().begin()->first;
  void* weight = model.constants->tensor(name).data_ptr();
  at::Tensor expected = model.constants->tensor(name).clone();

  std::optional<ir::RecycledMemory> recycled;
  recycled.emplace(*model.constants);
  model = ir::Model();
  torch::jit::Module back = torch::jit::load(path);
  recycled.reset();
  const at::Tensor w = back.attr("w").toTensor();
  CHECK(w.data_ptr() == weight);
  CHECK(at::equal(w, expected));
  std::filesystem::remove_all(dir);
}
