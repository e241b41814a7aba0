// `ptopt bench IN.pt [--vs OTHER.pt]`: latency of a model, honestly measured.
//
// A time-based warm-up (TorchScript's profiling executor specializes the
// graph over the first runs), then timed runs until both a minimum time and a
// minimum count are reached (or exactly --iters). Reported: min / median /
// mean / p90 / p99 and the coefficient of variation, with a warning when the
// run was noisy. With --vs the two models run interleaved (A B A B ...), so
// drift of the machine hits both, and the median ratio B/A is given with a
// bootstrap confidence interval. On CUDA, each run is timed with CUDA events
// when this ptopt was built against a CUDA LibTorch (otherwise by a device
// synchronize and the wall clock), and cuDNN's benchmark mode is on; both are
// reported.
#include "ir/model_format.h"
#include "api/api.h"
#include "tools/commands.h"
#include "session/bench.h"
#include "session/session.h"
#include "driver/report.h"
#include "driver/util.h"

#include "ir/model.h"
#include "measure/verdict.h"
#include "verify/runner.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

namespace ptopt::tools {

using measure::kNoisyCv;
using session::BenchResult;
using session::BenchSettings;
using session::benchModels;
using session::timingMethod;
using measure::RatioEstimate;
using measure::TimingStats;

void registerBenchOptions(CLI::App& cmd, BenchOptions& o) {
  cmd.add_option("model", o.model, "The model to time (A)")->required();
  cmd.add_option("--vs", o.vs, "A second model (B), run interleaved with A; prints the median ratio B/A");
  registerVerifyCliOptions(cmd, o.inputs, /*comparing=*/false);
  cmd.add_option("--threads", o.threads, "Intra-op threads (default: LibTorch's, all cores)")->check(CLI::PositiveNumber);
  cmd.add_option("--batch", o.batches, "Batch sizes to run (replace the first dimension of every tensor input)")
      ->delimiter(',');
  cmd.add_option("--warmup", o.warmupSeconds, "Seconds of warm-up (at least 3 runs; default 1)");
  cmd.add_option("--min-time", o.minSeconds, "Seconds of timed runs per model (default 2)");
  cmd.add_option("--min-iters", o.minIters, "Timed runs at least (default 10)");
  cmd.add_option("--iters", o.iters, "Exactly this many timed runs (overrides --min-time)");
  cmd.add_option("--json", o.jsonPath, "Write the results as JSON here");
  cmd.footer(
      "Examples:\n"
      "  ptopt bench model.pt --input-shape 1,3,224,224 --threads 1\n"
      "  ptopt bench model.pt --vs model.opt.pt --input-shape 1,3,224,224 --batch 1,64\n"
      "  ptopt bench model.pt --device cuda --input-shape 1,3,224,224 --batch 1,64\n"
      "Exit codes: 0 success, 2 bad input.");
}

namespace {

std::string verdictLine(measure::Verdict v) {
  return v == measure::Verdict::Faster ? ": B is faster" : v == measure::Verdict::Slower ? ": B is slower" : ": no clear difference";
}

// "65 runs: min 32.200  median 34.651 ... ms, CV 3.5%"; p99 only from 100
// runs on (below that it is just the maximum).

std::string statsLine(const TimingStats& s) {
  std::string line = fmt::format("{:>5} runs: min {:8.3f}  median {:8.3f}  mean {:8.3f}  p90 {:8.3f}", s.runs,
                                 s.minMs, s.medianMs, s.meanMs, s.p90Ms);
  if (s.runs >= 100) line += fmt::format("  p99 {:8.3f}", s.p99Ms);
  return line + fmt::format(" ms, CV {:4.1f}%", 100 * s.cv);
}

nlohmann::json statsJson(const TimingStats& s) {
  return {{"runs", s.runs}, {"min_ms", s.minMs}, {"median_ms", s.medianMs}, {"mean_ms", s.meanMs},
          {"p90_ms", s.p90Ms}, {"p99_ms", s.p99Ms}, {"cv", s.cv}};
}

}  // namespace

int runBench(const BenchOptions& o) {
  // Before loading: a ptopt file packs its oneDNN weights when it loads, for
  // the thread count then in effect.
  if (o.threads) at::set_num_threads(*o.threads);
  torch::jit::Module a = ir::loadRunnable(o.model);
  std::optional<torch::jit::Module> b;
  if (!o.vs.empty()) b = ir::loadRunnable(o.vs);
  FaceWords words;
  words.inputsHint = "";
  words.note = [](const std::string& note) { std::cout << "note: " << note << "\n"; };
  std::optional<PlannedInputs> planned;
  try {  // as ptopt.bench in Python plans them
    planned = planModelInputs(a, inputRequest(o.inputs), o.inputs.device, words);
  } catch (const std::invalid_argument& e) {  // no inputs, a bad input spec or device
    throw UsageError(e.what());
  }
  if (!o.batches.empty() && planned->source.fixed) throw UsageError("--batch works with --input-shape, not --inputs");
  const c10::Device device = planned->device;
  if (device.is_cuda()) at::globalContext().setBenchmarkCuDNN(true);
  torch::NoGradGuard noGrad;
  a.eval();
  a.to(device);
  if (b) {
    b->eval();
    b->to(device);
  }
  nlohmann::json results = nlohmann::json::array();
  std::vector<int64_t> batches = o.batches.empty() ? std::vector<int64_t>{0} : o.batches;
  std::cout << fmt::format("device {}, {} intra-op thread(s), timing by {}{}\n", verify::describeDevice(device),
                           at::get_num_threads(), timingMethod(device),
                           device.is_cuda() ? ", cuDNN benchmark mode on" : "");
  for (int64_t batch : batches) {
    verify::InputSource source = planned->source;
    if (batch > 0)
      for (auto& spec : source.specs)
        if (spec.kind == verify::InputSpec::Kind::Tensor && !spec.shape.empty()) spec.shape[0] = batch;
    std::vector<c10::IValue> inputs;
    for (const auto& v : source.inputsFor(0)) inputs.push_back(verify::toDevice(v, device));
    BenchSettings settings;
    settings.warmupSeconds = o.warmupSeconds;
    settings.minSeconds = o.minSeconds;
    settings.minIters = o.minIters;
    settings.iters = o.iters;
    const BenchResult measured = benchModels(a, b ? &*b : nullptr, inputs, device, settings);
    const std::vector<double>& ta = measured.samplesA;
    const std::string label = batch > 0 ? fmt::format(" (batch {})", batch) : "";
    const TimingStats& sa = measured.a;
    std::cout << fmt::format("A {}{}\n  {}\n", o.model, label, statsLine(sa));
    nlohmann::json entry = {{"batch", batch > 0 ? nlohmann::json(batch) : nlohmann::json()},
                            {"a", {{"model", o.model}, {"stats", statsJson(sa)}}}};
    const bool noisy = measured.noisy;
    if (b) {
      const TimingStats& sb = *measured.b;
      std::cout << fmt::format("B {}{}\n  {}\n", o.vs, label, statsLine(sb));
      const RatioEstimate& r = *measured.ratio;
      std::cout << fmt::format(
          "B/A median ratio {:.3f}x (95% CI {:.3f}-{:.3f}, bootstrap of {} resamples of {} interleaved pairs){}\n",
          r.median, r.low, r.high, r.resamples, ta.size(),
          verdictLine(measure::judge(r, 0.0)));  // the one verdict rule, with no margin: what the interval says
      entry["b"] = {{"model", o.vs}, {"stats", statsJson(sb)}};
      entry["ratio"] = {{"median", r.median}, {"ci95", {r.low, r.high}}, {"resamples", r.resamples}};
    }
    if (noisy)
      std::cout << fmt::format("warning: noisy run (CV above {:.0f}%): other programs are competing for the "
                               "machine; close them, pin --threads, or raise --min-time\n",
                               100 * kNoisyCv);
    entry["noisy"] = noisy;
    results.push_back(entry);
  }
  if (!o.jsonPath.empty()) {
    nlohmann::json j = {{"device", verify::describeDevice(device)}, {"threads", at::get_num_threads()},
                        {"timing", timingMethod(device)}, {"cudnn_benchmark", device.is_cuda()},
                        {"versions", versionsJson()}, {"inputs", planned->source.describeInputs()}, {"results", results}};
    std::ofstream out(o.jsonPath);
    if (!out) throw UsageError("cannot write '" + o.jsonPath + "'");
    out << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace ptopt::tools
