// ptopt: the command-line tool. Subcommands live in tools/cmd_*.cpp; this
// file parses the command line (CLI11) and maps failures to exit codes:
// 0 success, 2 usage error or bad input, 3 verification failed, 1 otherwise.
#include "tools/cmd_dot.h"
#include "tools/commands.h"
#include "api/load_ops.h"
#include "session/render.h"

#include "ir/model.h"
#include "ir/version.h"
#include "rewriters/pass.h"

#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include <pthread.h>

#include <iostream>

namespace {

int ptoptMain(int argc, char** argv);

// LibTorch's graph executor recurses about once per node when it first
// runs a graph (measured: a 10,000-layer conv stack, ~60k nodes, overflows
// the default 8 MiB stack), and verification runs the optimized graph. So
// the whole command runs on a thread with a 1 GiB stack (reserved address
// space; only what is used is ever committed).
int runWithLargeStack(int argc, char** argv) {
  struct Call {
    int argc;
    char** argv;
    int rc = 1;
  } call{argc, argv};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_t thread;
  const bool big = pthread_attr_setstacksize(&attr, size_t{1} << 30) == 0 &&
                   pthread_create(&thread, &attr, [](void* p) -> void* {
                     auto* c = static_cast<Call*>(p);
                     c->rc = ptoptMain(c->argc, c->argv);
                     return nullptr;
                   }, &call) == 0;
  pthread_attr_destroy(&attr);
  if (!big) return ptoptMain(argc, argv);  // no such thread here: run on this one
  pthread_join(thread, nullptr);
  return call.rc;
}

}  // namespace

int main(int argc, char** argv) { return runWithLargeStack(argc, argv); }

namespace {

int ptoptMain(int argc, char** argv) {
  using namespace ptopt::tools;
  // Every pool at the intra-op thread count (OMP_NUM_THREADS or the cores):
  // at::set_num_threads also sizes the pthreadpool XNNPACK runs on, which
  // otherwise keeps one thread per core whatever OMP_NUM_THREADS says, so
  // XNNPACK kernels would run (and --tune time them) on more threads than
  // everything else.
  at::set_num_threads(at::get_num_threads());
  CLI::App app{"ptopt: optimize TorchScript models for inference, with proof of numerics.\n"
               "  ptopt IN.pt OUT.pt [-O1 | --passes PIPELINE] [--input-shape 1,3,224,224]\n"
               "  ptopt show IN.pt\n  ptopt verify A.pt B.pt --input-shape 1,3,224,224\n"
               "  ptopt bench IN.pt [--vs OTHER.pt] --input-shape 1,3,224,224\n  ptopt passes [NAME]\n"
               "  ptopt dot IN.pt -o G.svg [--diff OTHER.pt]\n  ptopt tuning show|clear",
               "ptopt"};
  app.set_version_flag("--version", std::string("ptopt ") + ptopt::ptoptVersion() + " (" + ptopt::builtAgainst() + ")");
  app.require_subcommand(0, 1);

  OptimizeOptions opt;
  registerOptimizeOptions(app, opt);

  ShowOptions show;
  auto* showCmd = app.add_subcommand("show", "Print a model's IR and a table of op counts");
  registerShowOptions(*showCmd, show);

  VerifyOptions verifyOpts;
  auto* verifyCmd = app.add_subcommand("verify", "Compare two models' outputs on the same inputs (exit 0 or 3)");
  registerVerifyOptions(*verifyCmd, verifyOpts);

  BenchOptions bench;
  auto* benchCmd = app.add_subcommand("bench", "Time a model (min/median/p90/p99, CV); --vs: interleaved ratio");
  registerBenchOptions(*benchCmd, bench);

  PassesOptions passes;
  auto* passesCmd = app.add_subcommand("passes", "List every pass with its options and contract");
  registerPassesOptions(*passesCmd, passes);

  TuningOptions tuning;
  auto* tuningCmd = app.add_subcommand("tuning", "Show or clear the tuning cache of --tune");
  registerTuningOptions(*tuningCmd, tuning);

  DotCommandOptions dot;
  auto* dotCmd = app.add_subcommand("dot", "Draw a model's graph with GraphViz (.dot/.svg/.png), or a diff of two");
  registerDotOptions(*dotCmd, dot);
  // --load-ops, before or after the subcommand, on every command that loads a model.
  std::vector<std::string> opsLibraries;
  for (CLI::App* cmd : {&app, showCmd, verifyCmd, benchCmd, dotCmd}) {
    cmd->add_option_function<std::vector<std::string>>(
           "--load-ops",
           [&](const std::vector<std::string>& libs) { opsLibraries.insert(opsLibraries.end(), libs.begin(), libs.end()); },
           "Load a shared library that registers TorchScript operators (e.g. torchvision's ops) before the "
           "model; repeatable")
        ->type_name("LIB.so")
        ->allow_extra_args(false);  // one library per --load-ops: never swallow IN OUT
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "ptopt: error: " << e.what() << "\n(run 'ptopt --help' for usage)\n";
    return 2;
  }

  try {
    for (const auto& lib : opsLibraries) ptopt::loadOperatorLibrary(lib);
    if (*showCmd) return runShow(show);
    if (*passesCmd) return runPasses(passes);
    if (*verifyCmd) return runVerify(verifyOpts);
    if (*benchCmd) return runBench(bench);
    if (*dotCmd) return runDot(dot);
    if (*tuningCmd) return runTuning(tuning);
    return runOptimize(opt, argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "ptopt: error: " << e.what() << "\n";
    return 2;
  } catch (const ptopt::session::DrawingError& e) {  // a drawing's format or path (dot, --dot-dir)
    std::cerr << "ptopt: error: " << e.what() << "\n";
    return 2;
  } catch (const ptopt::ir::InputError& e) {
    std::cerr << "ptopt: error: " << e.what() << "\n";
    return 2;
  } catch (const WriteError& e) {
    std::cerr << "ptopt: error: " << e.what() << "\n(nothing was written; check free space and permissions)\n";
    return 1;
  } catch (const ptopt::rewriters::PassError& e) {
    std::cerr << "ptopt: error: " << e.what() << "\n(nothing was written; --bisect-limit N finds the pass execution that fails)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ptopt: internal error: " << ptopt::ir::torchErrorMessage(e) << "\n";
    return 1;
  }
}

}  // namespace
