// The constants of a program as a .pt2 stores them (ir/pt2.h
// pt2StoredConstant, withConstantsAsStoredInPt2): what --tune times a
// program's rewrites on before it is written, so that a channels-last
// weight is timed as the program reads it back (contiguous).
#include "ir/model.h"
#include "ir/pt2.h"

#include <catch2/catch.hpp>

using namespace ptopt;

TEST_CASE("a .pt2 stores constants contiguous, and the model it runs on has them so") {
  ir::Model m;
  const at::Tensor nhwc = torch::randn({8, 3, 3, 3}).contiguous(c10::MemoryFormat::ChannelsLast);
  const at::Tensor plain = torch::randn({8});
  const at::Tensor slice = torch::randn({4, 6}).narrow(1, 1, 3);  // a view into a larger storage
  m.constants->set("conv.weight", nhwc);
  m.constants->set("conv.bias", plain);
  m.constants->set("view", slice);
  m.constants->set("n", c10::IValue(int64_t{3}));
  m.methods.emplace_back("forward", std::make_unique<ir::Graph>(m.constants));

  const at::Tensor stored = ir::pt2StoredConstant(nhwc);
  CHECK(stored.is_contiguous());
  CHECK(torch::equal(stored, nhwc));

  const ir::Model as = ir::withConstantsAsStoredInPt2(m);
  const at::Tensor w = as.constants->tensor("conv.weight");
  CHECK(w.is_contiguous());
  CHECK_FALSE(w.is_contiguous(c10::MemoryFormat::ChannelsLast));
  CHECK(torch::equal(w, nhwc));
  // Already as stored: shared, not copied.
  CHECK(as.constants->tensor("conv.bias").data_ptr() == plain.data_ptr());
  const at::Tensor v = as.constants->tensor("view");
  CHECK(v.storage_offset() == 0);
  CHECK(static_cast<size_t>(v.nbytes()) == v.storage().nbytes());
  CHECK(torch::equal(v, slice));
  CHECK(as.constants->at("n").toInt() == 3);
  // The model given keeps its own.
  CHECK(m.constants->tensor("conv.weight").is_contiguous(c10::MemoryFormat::ChannelsLast));
  CHECK(as.methods.size() == 1);
}
