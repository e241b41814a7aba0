// The request's one option table (driver/request_options.h): what the CLI's
// flags and Python's keyword arguments set by name, each default stated once
// in driver::Request.
#include "driver/driver.h"
#include "driver/request_options.h"

#include <catch2/catch.hpp>

#include <set>

using namespace ptopt;

TEST_CASE("request options set their fields by name, and what is not given keeps Request's default", "[request]") {
  const driver::Request defaults;
  driver::Request r;
  driver::setRequestOptions(r, {{"measure_budget", 0.5}, {"measure_threads", 4}, {"verify", false},
                                {"rtol_for", {{"out[0]", 1e-3}}}, {"input_shapes", {"1,3,8,8"}},
                                {"seed", 7}, {"assume_isa", "avx2"}, {"target", nullptr}});
  CHECK(r.measureBudgetSeconds == 0.5);
  CHECK(r.measureThreads == 4);
  CHECK(r.verification == driver::Verification::Off);
  CHECK(r.tolerances.rtolFor.at("out[0]") == 1e-3);
  CHECK(r.inputs.shapes == std::vector<std::string>{"1,3,8,8"});
  CHECK(r.inputs.seed == 7);
  CHECK(r.assumeIsa == "avx2");
  // null and absent: the defaults.
  CHECK(r.target == defaults.target);
  CHECK(r.inputs.iterations == defaults.inputs.iterations);
  CHECK(r.pipeline == defaults.pipeline);
  CHECK(r.measure == defaults.measure);
}

TEST_CASE("every option of the table has a unique name, a type and a line of help", "[request]") {
  std::set<std::string> names;
  for (const auto& o : driver::requestOptions()) {
    CHECK(names.insert(o.name).second);
    CHECK_FALSE(o.type.empty());
    CHECK_FALSE(o.help.empty());
    CHECK(o.name.find('-') == std::string::npos);  // Python's spelling; the CLI's flag has '-' for '_'
  }
  CHECK(names.count("measure_budget"));
  CHECK(names.count("to"));
  driver::Request r;
  driver::setRequestOption(r, "to", "pt2");
  CHECK(r.to == ir::ModelFormat::Pt2);
  CHECK(names.count("pipeline"));
}

TEST_CASE("an unknown option or a value of another type is a RequestError naming it", "[request]") {
  driver::Request r;
  CHECK_THROWS_WITH(driver::setRequestOption(r, "measure_budjet", 1.0),
                    Catch::Contains("unknown option 'measure_budjet'") && Catch::Contains("'measure_budget'"));
  CHECK_THROWS_AS(driver::setRequestOption(r, "measure_budget", "fast"), driver::RequestError);
  CHECK_THROWS_WITH(driver::setRequestOption(r, "measure_threads", 0), Catch::Contains("measure_threads"));
  CHECK_THROWS_WITH(driver::setRequestOption(r, "iterations", 1.5), Catch::Contains("an integer"));
  CHECK_THROWS_WITH(driver::setRequestOption(r, "rule_files", "a.rules"), Catch::Contains("a list of strings"));
  CHECK_THROWS_AS(driver::setRequestOptions(r, nlohmann::json::array()), driver::RequestError);
  CHECK_THROWS_WITH(driver::setRequestOption(r, "to", "onnx"), Catch::Contains("'torchscript' or 'pt2'"));
  // Nothing was set by the failed calls.
  CHECK(r.measureBudgetSeconds == driver::Request().measureBudgetSeconds);
}
