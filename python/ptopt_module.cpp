// ptopt._C: the Python package's binding to the C++ library (pybind11,
// linked against libtorch_python so that ScriptModules cross in memory: a
// torch._C.ScriptModule is cast to torch::jit::Module and back by the
// pybind11 type torch itself registers). The Python layer (ptopt/_api.py)
// validates arguments, maps exceptions to ptopt's classes and wraps modules
// (torch.jit._recursive.wrap_cpp_module).
//
// Each call converts its Python arguments first, then runs the C++ work
// without the GIL on a thread with a 1 GiB stack (as the CLI does: LibTorch's
// graph executor recurses about once per node on a graph's first run), then
// converts the results.
#include "ir/model_format.h"
#include "api/api.h"
#include "session/bench.h"
#include "driver/measure.h"
#include "driver/op_table.h"
#include "session/render.h"
#include "session/session.h"
#include "driver/request_options.h"

#include "ir/load_time.h"
#include "ir/model.h"
#include "ir/version.h"
#include "quant/calibration.h"
#include "rewriters/rules.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <pthread.h>

#include <exception>
#include <functional>

namespace py = pybind11;

namespace {

// Runs `f` without the GIL on a thread with a 1 GiB stack (reserved
// address space; only what is used is committed); rethrows its exception.
void runOnLargeStack(const std::function<void()>& f) {
  struct Call {
    const std::function<void()>* f;
    std::exception_ptr error;
  } call{&f, nullptr};
  auto body = [](void* p) -> void* {
    auto* c = static_cast<Call*>(p);
    try {
      (*c->f)();
    } catch (...) {
      c->error = std::current_exception();
    }
    return nullptr;
  };
  py::gil_scoped_release release;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_t thread;
  const bool big = pthread_attr_setstacksize(&attr, size_t{1} << 30) == 0 &&
                   pthread_create(&thread, &attr, body, &call) == 0;
  pthread_attr_destroy(&attr);
  if (big) pthread_join(thread, nullptr);
  else body(&call);  // no such thread here: run on this one
  if (call.error) std::rethrow_exception(call.error);
}

// ---- Exceptions: C++ types -> ptopt's Python classes (ptopt/_errors.py).

py::object errorClass(const char* name) { return py::module_::import("ptopt._errors").attr(name); }

[[noreturn]] void raise(const char* cls, const std::string& message, py::dict extra = {}) {
  py::object instance = errorClass(cls)(message, **extra);
  PyErr_SetObject(instance.get_type().ptr(), instance.ptr());
  throw py::error_already_set();
}

template <typename F>
auto translating(const char* textErrorClass, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const py::error_already_set&) {
    throw;
  } catch (const ptopt::VerificationFailed& e) {
    py::dict extra;
    extra["report_json"] = e.report.toJson().dump();
    extra["verdict"] = e.report.verdict();
    extra["failure_report"] = e.report.failureReport();
    raise("VerificationError", e.what(), extra);
  } catch (const ptopt::rewriters::TextError& e) {
    py::dict extra;
    extra["line"] = e.line();
    extra["column"] = e.column();
    extra["detail"] = e.message();
    raise(textErrorClass, e.what(), extra);
  } catch (const ptopt::InputsDoNotFit& e) {
    raise("InputShapeError", e.what());
  } catch (const ptopt::verify::InputPlanError& e) {
    raise("InputShapeError", e.what());
  } catch (const ptopt::ir::InputError& e) {
    raise("InputError", e.what());
  } catch (const ptopt::rewriters::PassError& e) {
    raise("PassError", e.what());
  } catch (const std::invalid_argument& e) {
    raise("InputError", e.what());
  } catch (const std::exception& e) {
    throw std::runtime_error(ptopt::ir::torchErrorMessage(e));
  }
}

// Loading a file: its errors are "not a TorchScript archive" or an
// unknown operator, told apart here.
template <typename F>
void loading(F&& f) {
  try {
    f();
  } catch (const ptopt::ir::InputError& e) {
    const std::string msg = e.what();
    if (msg.find("which no loaded library registers") != std::string::npos)
      raise("UnknownOperatorError",
            msg + "\n(Python: pass load_ops=['LIB.so'], or import the package that registers the operator, e.g. "
                  "`import torchvision`, before loading the model)");
    raise("NotTorchScriptError", msg);
  }
}

// ---- Conversions.

// Whether eval() would change `m` (or one of its submodules).
bool anyTraining(const torch::jit::Module& m) {
  bool training = false;
  for (const auto& sub : m.modules()) training = training || sub.is_training();
  return training;
}

// Whether timing `m` on `device` would change it (its mode or device).
bool needsCopy(const torch::jit::Module& m, c10::Device device) {
  if (anyTraining(m)) return true;
  for (const auto& p : m.parameters()) if (p.device() != device) return true;
  for (const auto& b : m.buffers()) if (b.device() != device) return true;
  return false;
}

torch::jit::Module toModule(const py::handle& obj) { return py::cast<torch::jit::Module>(obj); }

py::object fromModule(const torch::jit::Module& m) { return py::cast(m); }

// A Python value as an IValue, its TorchScript type inferred as the tracer
// infers it (torch._C._jit_try_infer_type, then torch::jit::toIValue). Not
// pybind_utils.h's inline toTypeInferredIValue: it calls a function that
// libtorch_python exports in 1.13 but not in 2.x (undefined symbol at import).
c10::IValue inferredIValue(const py::handle& v) {
  const py::object inferred = py::module_::import("torch._C").attr("_jit_try_infer_type")(v);
  if (inferred.attr("success")().cast<bool>())
    return torch::jit::toIValue(v, inferred.attr("type")().cast<c10::TypePtr>());
  // A scripted module passed as a value (its object).
  const py::object scripted = py::module_::import("torch.jit").attr("ScriptModule");
  if (py::isinstance(v, scripted)) return toModule(v.attr("_c"))._ivalue();
  throw std::invalid_argument("cannot pass " + py::repr(v).cast<std::string>().substr(0, 80) +
                              " to a TorchScript model: " + inferred.attr("reason")().cast<std::string>());
}

// (names, values) from Python: values converted by type inference
// (tensors, numbers, None, lists, tuples, dicts).
ptopt::verify::InputSet toInputSet(const std::vector<std::string>& names, const py::list& values) {
  ptopt::verify::InputSet set;
  set.names = names;
  for (const auto& v : values) {
    if (v.is_none()) set.values.emplace_back();
    else set.values.push_back(inferredIValue(v));
  }
  return set;
}

// The input request of a call: values in memory, or shapes (seeded).
ptopt::verify::InputRequest inputRequest(const py::object& names, const py::object& values, const py::object& shapes,
                                         uint64_t seed, int iterations) {
  ptopt::verify::InputRequest r;
  if (!values.is_none()) r.values = toInputSet(names.cast<std::vector<std::string>>(), values.cast<py::list>());
  if (!shapes.is_none()) r.shapes = shapes.cast<std::vector<std::string>>();
  r.seed = seed;
  r.iterations = iterations;
  return r;
}

py::dict verifyReportDict(const ptopt::verify::VerifyReport& r) {
  py::dict d;
  d["json"] = r.toJson().dump();
  d["verdict"] = r.verdict();
  d["failure_report"] = r.failureReport();
  d["summary"] = r.iterations.empty() ? std::string() : r.iterations.front().comparison.summary();
  return d;
}

// ---- Calls.

// ptopt.optimize: the request's options arrive by name, as JSON (the
// driver's one table, driver/request_options.h: the CLI's flags are the same
// options); what is not data (the module, tensors in memory) beside them.
py::dict optimize(const py::object& module, const std::string& path, const std::string& optionsJson,
                  const py::object& inputNames, const py::object& inputValues, const py::object& calibration) {
  ptopt::OptimizeRequest req;
  req.input = module.is_none() ? path : "";
  translating("PipelineError", [&] {
    ptopt::driver::setRequestOptions(req, nlohmann::json::parse(optionsJson));
    return 0;
  });
  if (!inputValues.is_none())
    req.inputs.values = toInputSet(inputNames.cast<std::vector<std::string>>(), inputValues.cast<py::list>());
  const ptopt::ir::ImportOptions importOptions = req.importOptions;

  std::optional<torch::jit::Module> given;
  if (!module.is_none()) {
    given = toModule(module);
    // Optimizer::fromModule puts the model in eval mode: never the caller's.
    if (anyTraining(*given)) given = given->clone();
  }
  // calibration=[batch, ...] for quantize="int8" (the CLI's --calibration),
  // converted here, under the GIL.
  if (!calibration.is_none())
    for (const auto& batch : calibration.cast<py::list>()) req.calibration.push_back(inferredIValue(batch));
  std::optional<ptopt::OptimizeResult> result;
  std::optional<ptopt::Optimizer> opt;
  if (!given) loading([&] { runOnLargeStack([&] { opt.emplace(ptopt::Optimizer::load(path, importOptions)); }); });
  return translating("PipelineError", [&] {
    runOnLargeStack([&] {
      if (!opt) opt.emplace(ptopt::Optimizer::fromModule(*given, importOptions));
      result.emplace(ptopt::optimizeModule(std::move(*opt), req));
    });
    py::dict d;
    d["module"] = fromModule(result->serialized.module);
    d["bytes"] = py::bytes(result->serialized.bytes);
    d["format"] = ptopt::ir::formatName(result->format);
    d["pipeline"] = result->pipeline;
    d["verification"] = result->verification ? py::object(verifyReportDict(*result->verification)) : py::none();
    d["verification_skipped"] = result->verificationSkipped;
    d["notes"] = result->notes;
    d["record_json"] = result->record().dump();
    d["nodes_after"] = result->nodesAfter;
    d["written"] = result->written;
    return d;
  });
}

py::dict verifyModules(const py::object& a, const py::object& b, const py::object& inputNames,
                       const py::object& inputValues, const py::object& inputShapes, std::optional<double> rtol,
                       std::optional<double> atol, const std::map<std::string, double>& rtolFor,
                       const std::map<std::string, double>& atolFor, const std::string& device, uint64_t seed,
                       int iterations) {
  const torch::jit::Module ma = toModule(a), mb = toModule(b);
  const ptopt::verify::InputRequest req = inputRequest(inputNames, inputValues, inputShapes, seed, iterations);
  ptopt::driver::ToleranceOverrides given;
  given.rtol = rtol;
  given.atol = atol;
  given.rtolFor = rtolFor;
  given.atolFor = atolFor;
  return translating("PipelineError", [&] {
    ptopt::verify::VerifyReport report;
    std::vector<std::string> notes;
    runOnLargeStack([&] {
      ptopt::FaceWords words;
      words.candidateName = "b";
      words.note = [&notes](const std::string& note) { notes.push_back(note); };
      // b's own precision sets the criterion (a bf16 b is judged as bf16), the arguments' terms over it.
      const ptopt::verify::ToleranceSet tol = ptopt::candidateTolerances(mb, given, words);
      report = ptopt::compareModules(ma, mb, req, tol, device);
    });
    report.notes.insert(report.notes.begin(), notes.begin(), notes.end());
    return verifyReportDict(report);
  });
}

py::dict bench(const py::object& a, const py::object& b, const py::object& inputNames, const py::object& inputValues,
               const py::object& inputShapes, std::optional<int> threads, const std::string& deviceName,
               double warmup, double minTime, int minIters, std::optional<int> iters, uint64_t seed) {
  torch::jit::Module ma = toModule(a);
  std::optional<torch::jit::Module> mb;
  if (!b.is_none()) mb = toModule(b);
  const ptopt::verify::InputRequest req = inputRequest(inputNames, inputValues, inputShapes, seed, 1);
  ptopt::session::BenchSettings settings;
  settings.warmupSeconds = warmup;
  settings.minSeconds = minTime;
  settings.minIters = minIters;
  settings.iters = iters;
  return translating("PipelineError", [&] {
    ptopt::session::BenchResult r;
    std::string device, timing;
    int usedThreads = 0;
    runOnLargeStack([&] {
      // Planned as `ptopt bench` plans them.
      const ptopt::PlannedInputs planned = ptopt::planModelInputs(ma, req, deviceName);
      const c10::Device dev = planned.device;
      std::vector<c10::IValue> inputs;
      for (const auto& v : planned.source.inputsFor(0)) inputs.push_back(ptopt::verify::toDevice(v, dev));
      // The caller's modules keep their device and mode: time copies when
      // they would change.
      // (Module::to moves tensors in place, so a device move is a deep copy.)
      torch::jit::Module ta = needsCopy(ma, dev) ? ptopt::ir::moduleOnDevice(ma.clone(), dev) : ma;
      std::optional<torch::jit::Module> tb;
      if (mb) tb = needsCopy(*mb, dev) ? ptopt::ir::moduleOnDevice(mb->clone(), dev) : *mb;
      ta.eval();
      if (tb) tb->eval();
      std::vector<torch::jit::Module> timed{ta};
      if (tb) timed.push_back(*tb);
      // ptopt's packed oneDNN weights follow the thread count: repacked at
      // the timing's count, and back at the caller's after.
      ptopt::ScopedThreads scoped(threads ? *threads : 0, timed);
      usedThreads = at::get_num_threads();
      torch::NoGradGuard noGrad;
      try {
        r = ptopt::session::benchModels(ta, tb ? &*tb : nullptr, inputs, dev, settings);
      } catch (const ptopt::ir::InputError& e) {
        throw ptopt::InputsDoNotFit(e.what());
      }
      device = ptopt::verify::describeDevice(dev);
      timing = ptopt::session::timingMethod(dev);
    });
    auto stats = [](const ptopt::measure::TimingStats& s) {
      py::dict d;
      d["runs"] = s.runs;
      d["min_ms"] = s.minMs;
      d["median_ms"] = s.medianMs;
      d["mean_ms"] = s.meanMs;
      d["p90_ms"] = s.p90Ms;
      d["p99_ms"] = s.p99Ms;
      d["cv"] = s.cv;
      return d;
    };
    py::dict d;
    d["a"] = stats(r.a);
    d["b"] = r.b ? py::object(stats(*r.b)) : py::none();
    if (r.ratio) {
      d["ratio"] = r.ratio->median;
      d["ci95"] = py::make_tuple(r.ratio->low, r.ratio->high);
    } else {
      d["ratio"] = py::none();
      d["ci95"] = py::none();
    }
    d["noisy"] = r.noisy;
    d["device"] = device;
    d["threads"] = usedThreads;
    d["timing"] = timing;
    d["samples_a"] = r.samplesA;
    d["samples_b"] = r.samplesB;
    return d;
  });
}

const char* kindName(ptopt::rewriters::OptionKind k) {
  using K = ptopt::rewriters::OptionKind;
  switch (k) {
    case K::Bool: return "bool";
    case K::Int: return "int";
    case K::Float: return "float";
    case K::String: return "string";
    case K::Enum: return "enum";
  }
  return "?";
}

py::list passes() {
  py::list out;
  for (const auto* info : ptopt::defaultRegistry().all()) {
    py::list options;
    for (const auto& o : info->options) {
      py::dict d;
      d["name"] = o.name;
      d["kind"] = kindName(o.kind);
      d["default"] = o.defaultValue;
      d["help"] = o.help;
      d["choices"] = o.choices;
      d["min"] = o.min;
      d["max"] = o.max;
      options.append(d);
    }
    py::dict d;
    d["name"] = info->name;
    d["description"] = info->description;
    d["contract"] = info->contract;
    d["options"] = options;
    out.append(d);
  }
  return out;
}

std::string parsePipeline(const std::string& text) {
  return translating("PipelineError", [&] { return ptopt::rewriters::printPipeline(ptopt::parsePipelineOrPreset(text)); });
}

// `base` with `extra`'s passes added by the one rule for extra passes.
std::string extendPipeline(const std::string& base, const std::string& extra) {
  return translating("PipelineError", [&] {
    ptopt::rewriters::Pipeline p = ptopt::parsePipelineOrPreset(base);
    ptopt::rewriters::addExtraPasses(p, ptopt::parsePipelineOrPreset(extra).elements);
    return ptopt::rewriters::printPipeline(p);
  });
}

std::string suggestPass(const std::string& name) { return ptopt::defaultRegistry().suggest(name); }

void checkRules(const std::string& text, const std::string& source) {
  translating("RulesError", [&] {
    ptopt::rewriters::parseRules(text, source);
    return 0;
  });
}

py::list show(const py::object& module, const std::vector<std::string>& preserveMethods) {
  const torch::jit::Module m = toModule(module);
  return translating("PipelineError", [&] {
    std::vector<ptopt::MethodText> methods;
    runOnLargeStack([&] { methods = ptopt::showModule(m, preserveMethods); });
    py::list out;
    for (const auto& mt : methods) {
      py::dict d;
      d["name"] = mt.name;
      d["text"] = mt.text;
      d["op_counts"] = mt.opCounts;
      d["nodes"] = mt.nodes;
      d["constants"] = mt.constants;
      d["table"] = ptopt::driver::formatOpTable(mt.opCounts);
      out.append(d);
    }
    return out;
  });
}

py::dict draw(const py::object& module, const py::object& other, const std::string& path, int depth,
              size_t maxNodes, bool showConstants, const std::string& colorBy, bool clusters, bool legend,
              const std::string& title, const std::string& method, const std::vector<std::string>& inputShapes) {
  const torch::jit::Module a = toModule(module);
  std::optional<torch::jit::Module> b;
  if (!other.is_none()) b = toModule(other);
  return translating("PipelineError", [&] {
    ptopt::draw::DotOptions options;
    options.depth = depth;
    options.maxNodes = maxNodes;
    options.showConstants = showConstants;
    const auto color = ptopt::draw::dotColorByFromName(colorBy);
    if (!color) throw std::invalid_argument("color_by must be 'op' or 'dtype', not '" + colorBy + "'");
    options.colorBy = *color;
    options.clusters = clusters;
    options.legend = legend;
    options.title = title;
    ptopt::draw::DiffCounts counts;
    std::string dot;
    runOnLargeStack([&] {
      dot = ptopt::drawModules(a, b ? &*b : nullptr, options, method, inputShapes, &counts);
      if (!path.empty()) ptopt::session::writeDrawing(dot, path);
    });
    py::dict d;
    d["dot"] = dot;
    d["added"] = counts.added;
    d["changed"] = counts.changed;
    d["removed"] = counts.removed;
    return d;
  });
}

py::object load(const std::string& path) {
  torch::jit::Module m;
  loading([&] { runOnLargeStack([&] { m = ptopt::ir::loadRunnable(path); }); });
  return fromModule(m);
}

std::vector<std::string> loadOps(const std::string& path) {
  return translating("PipelineError", [&] { return ptopt::loadOperatorLibrary(path); });
}

py::bytes serialize(const py::object& module) {
  const torch::jit::Module m = toModule(module);
  std::string bytes;
  runOnLargeStack([&] { bytes = ptopt::ir::serializeModule(m); });
  return py::bytes(bytes);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "ptopt's C++ library (private: use the functions of the ptopt package)";
  m.attr("__version__") = ptopt::ptoptVersion();
  m.attr("built_against") = ptopt::builtAgainst();  // "LibTorch 2.15.0, CUDA 13.0 compiled in"
  m.def("optimize", &optimize);
  m.def("verify", &verifyModules);
  m.def("bench", &bench);
  m.def("repack", [](const py::object& module) {
    torch::jit::Module m = toModule(module);
    py::gil_scoped_release release;
    torch::NoGradGuard noGrad;
    return ptopt::ir::repackLoadTimeValues(m);
  });
  m.def("passes", &passes);
  m.def("presets", [] {
    std::vector<std::string> out;
    for (int level = 0; level <= 3; ++level) out.push_back(ptopt::rewriters::presetPipeline(level));
    return out;
  });
  m.def("parse_pipeline", &parsePipeline);
  m.def("extend_pipeline", &extendPipeline);
  m.def("suggest_pass", &suggestPass);
  m.def("check_rules", &checkRules);
  m.def("show", &show);
  m.def("draw", &draw);
  m.def("graphviz_available", &ptopt::session::graphvizAvailable);
  m.def("load", &load);
  m.def("load_ops", &loadOps);
  m.def("torchvision_ops_library", &ptopt::findTorchvisionOpsLibrary);
  m.def("serialize", &serialize);
  m.attr("pybind11_internals_id") = PYBIND11_INTERNALS_ID;
}
