// The Optimizer's stages as `ptopt IN OUT` uses them (tools/api.h): timed
// load, the reference a pipeline is verified against, the CPU stand-in for
// a model the CPU cannot run, and serialize + save of exactly the bytes
// that were loaded back.
#include "tests/support/fixtures.h"
#include "api/api.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace ptopt;

namespace {

const c10::Device kCpu(c10::kCPU);

verify::InputSource oneRun(const test::Fixture& f) {
  verify::InputSource source;
  source.specs = f.inputs;
  source.iterations = 1;
  return source;
}

std::string forwardGraph(const torch::jit::Module& m) { return m.get_method("forward").graph()->toString(); }

}  // namespace

TEST_CASE("api: load times reading and importing") {
  Optimizer::LoadTimes times;
  Optimizer opt = Optimizer::load(test::fixture("resnet18_script").path, {}, &times);
  CHECK(times.readMs > 0);
  CHECK(times.importMs > 0);
  CHECK(opt.model().forward().numNodes() > 0);
}

TEST_CASE("api: a traced training-mode model is verified against its eval semantics when the pipeline specializes it") {
  const auto& f = test::fixture("train_mode_trace");
  Optimizer opt = Optimizer::load(f.path);
  REQUIRE(opt.trainingMode().tracedInTraining);
  const Optimizer::Reference specialized = opt.reference(parsePipelineOrPreset("-O1"), kCpu);
  CHECK(specialized.specializesTracedFlags);
  CHECK(specialized.module._ivalue() != opt.original()._ivalue());
  CHECK(forwardGraph(specialized.module).find("dropout") == std::string::npos);
  // Numerics: the eval-semantics reference computes what the model's weights
  // compute in eval mode (the fixture made by Python for that purpose).
  torch::jit::Module evalRef = torch::jit::load(test::fixture("train_mode_eval_reference").path);
  const auto inputs = oneRun(f).inputsFor(0);
  torch::jit::Module ref = specialized.module;
  CHECK(torch::allclose(test::runForward(ref, inputs).toTensor(), test::runForward(evalRef, inputs).toTensor(),
                        1e-4, 1e-5));

  // Must not fire: a pipeline that leaves the training flags alone is
  // compared with the original itself.
  const Optimizer::Reference plain = opt.reference(parsePipelineOrPreset("cse,dce"), kCpu);
  CHECK_FALSE(plain.specializesTracedFlags);
  CHECK(plain.module._ivalue() == opt.original()._ivalue());
  // And an eval-mode model is never specialized.
  Optimizer evalModel = Optimizer::load(test::fixture("resnet18_script").path);
  CHECK_FALSE(evalModel.reference(parsePipelineOrPreset("-O1"), kCpu).specializesTracedFlags);
}

TEST_CASE("api: serialize gives the bytes save writes and the module loaded back from them") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  opt.run("-O1");
  const Optimizer::Serialized s = opt.serialize();
  REQUIRE_FALSE(s.bytes.empty());
  const auto path = std::filesystem::temp_directory_path() / "ptopt_api_test_serialized.pt";
  Optimizer::save(s, path.string());
  std::ifstream in(path, std::ios::binary);
  std::stringstream written;
  written << in.rdbuf();
  CHECK(written.str() == s.bytes);
  std::filesystem::remove(path);
  // The loaded-back module computes what the in-memory export computes.
  const auto inputs = oneRun(f).inputsFor(0);
  torch::jit::Module loaded = s.module, exported = opt.exportModule();
  CHECK(torch::equal(test::runForward(loaded, inputs).toTensor(), test::runForward(exported, inputs).toTensor()));
}

TEST_CASE("api: no stand-in for a model the CPU runs (must not fire)") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  const auto pipeline = parsePipelineOrPreset("-O2");
  const auto report = opt.run(pipeline, &ctx);
  CHECK_FALSE(opt.cpuStandIn(pipeline, ctx, report, kCpu).has_value());
}

TEST_CASE("api: a CUDA-target model is checked on the CPU by a stand-in without fuse-cudnn") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.targetDevice = "cuda";
  ctx.exampleInputs = oneRun(f).inputsFor(0);
  const auto pipeline = parsePipelineOrPreset("-O1");
  const auto report = opt.run(pipeline, &ctx);
  REQUIRE(ir::requiresCuda(opt.model()));  // fuse-cudnn fired
  const auto standIn = opt.cpuStandIn(pipeline, ctx, report, kCpu);
  REQUIRE(standIn);
  CHECK(forwardGraph(standIn->module).find("cudnn_convolution") == std::string::npos);
  REQUIRE(standIn->notes.size() == 1);
  CHECK_THAT(standIn->notes[0], Catch::Contains("fuse-cudnn"));
  // The stand-in passes against the reference.
  const auto runner = opt.referenceRunner(opt.reference(pipeline, kCpu), oneRun(f), {}, kCpu);
  CHECK(runner.check(standIn->module).passed);
}

TEST_CASE("api: an fp16 model is checked on the CPU by an emulating stand-in") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  const auto pipeline = parsePipelineOrPreset("-O1,cast{dtype=fp16}");
  const auto report = opt.run(pipeline, &ctx);
  const auto standIn = opt.cpuStandIn(pipeline, ctx, report, kCpu);
  REQUIRE(standIn);
  REQUIRE(standIn->notes.size() == 1);
  CHECK_THAT(standIn->notes[0], Catch::Contains("fp16 checked by emulation"));
  const auto fp16 = verify::ToleranceSet{verify::Tolerance::forPrecision(c10::ScalarType::Half), {}, {}};
  const auto runner = opt.referenceRunner(opt.reference(pipeline, kCpu), oneRun(f), fp16, kCpu);
  CHECK(runner.check(standIn->module).passed);
}
