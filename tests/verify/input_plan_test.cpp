// Input planning (verify/input_plan.h): which inputs verification runs on,
// from --input-shape, --inputs, or an assumption from the model's first op.
#include "tests/support/fixtures.h"
#include "api/api.h"
#include "verify/input_plan.h"

#include <catch2/catch.hpp>

using namespace ptopt;

namespace {
ir::Model model(const std::string& name) { return test::importFixture(test::fixture(name)); }
}  // namespace

TEST_CASE("planning: given shapes become seeded specs, with the seed, count and executor asked for") {
  ir::Model m = model("resnet18_script");
  verify::InputRequest r;
  r.shapes = {"1,3,64,64"};
  r.seed = 5;
  r.iterations = 2;
  r.executor = "optimizing";
  const verify::InputPlan plan = verify::planInputs(r, m.forward());
  REQUIRE(plan.source);
  CHECK_FALSE(plan.inferred);
  CHECK(plan.message.empty());
  REQUIRE(plan.source->specs.size() == 1);
  CHECK(plan.source->specs[0].shape == std::vector<int64_t>{1, 3, 64, 64});
  CHECK(plan.source->seed == 5);
  CHECK(plan.source->iterations == 2);
  CHECK(plan.source->executor == verify::Executor::Optimizing);
  CHECK_FALSE(plan.source->fixed.has_value());
}

TEST_CASE("planning: without shapes a conv model's input is assumed from its first conv, and says so") {
  ir::Model m = model("resnet18_script");
  const verify::InputPlan plan = verify::planInputs({}, m.forward());
  REQUIRE(plan.source);
  CHECK(plan.inferred);
  REQUIRE(plan.source->specs.size() == 1);
  CHECK(plan.source->specs[0].shape == std::vector<int64_t>{1, 3, 224, 224});
  CHECK_THAT(plan.message, Catch::Contains("conv"));
}

TEST_CASE("planning: nothing is assumed for a model whose inputs cannot be inferred (no source, not an error)") {
  ir::Model m = model("control_flow");
  const verify::InputPlan plan = verify::planInputs({}, m.forward());
  CHECK_FALSE(plan.source);
  CHECK_FALSE(plan.inferred);
  CHECK_THAT(plan.message, Catch::StartsWith("verification skipped: the input shapes of (x, y, n) cannot be inferred"));
}

TEST_CASE("planning: --int-range applies to integer tensor specs") {
  ir::Model m = model("embedding_int64");
  verify::InputRequest r;
  r.shapes = {"2,7:int64"};
  r.intRange = "5,6";
  const verify::InputPlan plan = verify::planInputs(r, m.forward());
  REQUIRE(plan.source);
  REQUIRE(plan.source->specs.size() == 1);
  CHECK(plan.source->specs[0].dtype == c10::ScalarType::Long);
  CHECK(plan.source->specs[0].low == 5);
  CHECK(plan.source->specs[0].high == 6);
}

TEST_CASE("planning: requests that cannot work throw InputPlanError naming the problem") {
  ir::Model m = model("control_flow");
  verify::InputRequest both;
  both.shapes = {"3,8"};
  both.file = "inputs.pt";
  CHECK_THROWS_MATCHES(verify::planInputs(both, m.forward()), verify::InputPlanError,
                       Catch::Matchers::Message("give either --inputs or --input-shape, not both"));
  verify::InputRequest bad;
  bad.shapes = {"3,x"};
  CHECK_THROWS_AS(verify::planInputs(bad, m.forward()), verify::InputPlanError);
  verify::InputRequest missing;  // control_flow takes x, y and n
  missing.shapes = {"3,8"};
  CHECK_THROWS_WITH(verify::planInputs(missing, m.forward()), Catch::Contains("--input-shape was given 1 time(s)"));
  verify::InputRequest noFile;
  noFile.file = test::fixturesDir() + "/no_such_inputs.pt";
  CHECK_THROWS_AS(verify::planInputs(noFile, m.forward()), verify::InputPlanError);
}

TEST_CASE("planning: complete shapes for a model with several inputs are kept in order") {
  ir::Model m = model("control_flow");
  verify::InputRequest r;
  r.shapes = {"3,8", "3,8", "int:3"};
  const verify::InputPlan plan = verify::planInputs(r, m.forward());
  REQUIRE(plan.source);
  REQUIRE(plan.source->specs.size() == 3);
  CHECK(plan.source->specs[2].kind == verify::InputSpec::Kind::Int);
  CHECK(plan.source->specs[2].scalar == 3);
}
