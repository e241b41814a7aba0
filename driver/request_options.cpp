// The request's options by name (the contract is in the header).
#include "driver/request_options.h"

#include "quant/quantize.h"

#include "driver/driver.h"  // RequestError
#include "driver/util.h"    // availablePhysicalCores

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

namespace ptopt::driver {

namespace {

using Json = nlohmann::json;
using Setter = std::function<void(Request&, const Json&)>;

struct Entry {
  RequestOption option;
  Setter set;
};

[[noreturn]] void badType(const std::string& name, const std::string& type, const Json& v) {
  throw RequestError(fmt::format("{}: expected {}, got {}", name, type, v.dump()));
}

bool asBool(const std::string& name, const Json& v) {
  if (!v.is_boolean()) badType(name, "true or false", v);
  return v.get<bool>();
}
double asNumber(const std::string& name, const Json& v) {
  if (!v.is_number()) badType(name, "a number", v);
  return v.get<double>();
}
int64_t asInteger(const std::string& name, const Json& v) {
  if (!v.is_number_integer()) badType(name, "an integer", v);
  return v.get<int64_t>();
}
// Thread counts: a list of positive integers, or a string of them and
// "all" (the physical cores available), comma-separated; each once, in the
// order given.
std::vector<int> asThreadCounts(const std::string& name, const Json& v) {
  const char* expected = "thread counts: positive integers or \"all\", as a list or comma-separated";
  std::vector<Json> items;
  if (v.is_array()) {
    items.assign(v.begin(), v.end());
  } else if (v.is_string()) {
    std::string text = v.get<std::string>(), item;
    for (size_t start = 0; start <= text.size();) {
      const size_t comma = std::min(text.find(',', start), text.size());
      item = text.substr(start, comma - start);
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      if (item == "all") items.emplace_back("all");
      else if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos && item.size() < 6)
        items.emplace_back(std::stoi(item));
      else badType(name, expected, v);
      start = comma + 1;
    }
  } else {
    badType(name, expected, v);
  }
  std::vector<int> out;
  for (const Json& item : items) {
    int n = 0;
    if (item.is_string() && item.get<std::string>() == "all") n = availablePhysicalCores();
    else if (item.is_number_integer() && item.get<int64_t>() >= 1 && item.get<int64_t>() <= 4096) n = item.get<int>();
    else badType(name, expected, v);
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  if (out.empty()) badType(name, expected, v);
  return out;
}
std::string asString(const std::string& name, const Json& v) {
  if (!v.is_string()) badType(name, "a string", v);
  return v.get<std::string>();
}
std::vector<std::string> asStrings(const std::string& name, const Json& v) {
  if (!v.is_array()) badType(name, "a list of strings", v);
  std::vector<std::string> out;
  for (const Json& e : v) out.push_back(asString(name, e));
  return out;
}
std::map<std::string, double> asNumbersByOutput(const std::string& name, const Json& v) {
  if (!v.is_object()) badType(name, "numbers by output name", v);
  std::map<std::string, double> out;
  for (const auto& [k, e] : v.items()) out[k] = asNumber(name, e);
  return out;
}

// The table. One line per option: its name, its type, what it sets.
const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> t;
    auto add = [&t](std::string name, std::string type, std::string help, Setter set) {
      t.push_back({{std::move(name), std::move(type), std::move(help)}, std::move(set)});
    };
    // The pipeline.
    add("pipeline", "string", "pipeline text or a preset", [](Request& r, const Json& v) { r.pipeline = asString("pipeline", v); });
    add("rule_texts", "strings", "rule files' text in memory",
        [](Request& r, const Json& v) { r.ruleTexts = asStrings("rule_texts", v); });
    add("rule_files", "strings", "rule files", [](Request& r, const Json& v) { r.ruleFiles = asStrings("rule_files", v); });
    add("quantize", "string", "int8: quantize{dtype=int8} joins the pipeline; bf16, fp16, auto: cast{dtype=...}",  // lint: not a pass (the option)
        [](Request& r, const Json& v) {
          r.quantize = asString("quantize", v);  // lint: not a pass (the option)
          if (!quant::isRequestDtype(r.quantize)) badType("quantize", quant::kRequestDtypes, v);  // lint: not a pass (the option)
        });
    add("to", "string", "the result's format: torchscript or pt2 (default: the input's)", [](Request& r, const Json& v) {
      const auto format = ir::parseModelFormat(asString("to", v));
      if (!format) badType("to", "'torchscript' or 'pt2'", v);
      r.to = format;
    });
    add("preserve_methods", "strings", "methods to keep besides forward",
        [](Request& r, const Json& v) { r.importOptions.preserveMethods = asStrings("preserve_methods", v); });
    // Inputs and verification.
    add("input_shapes", "strings", "one spec per input (--input-shape)",
        [](Request& r, const Json& v) { r.inputs.shapes = asStrings("input_shapes", v); });
    add("seed", "integer", "seed of the random inputs", [](Request& r, const Json& v) {
      const int64_t s = asInteger("seed", v);
      if (s < 0) badType("seed", "a non-negative integer", v);
      r.inputs.seed = static_cast<uint64_t>(s);
    });
    add("iterations", "integer", "input sets verified", [](Request& r, const Json& v) {
      const int64_t n = asInteger("iterations", v);
      if (n < 1) badType("iterations", "a positive integer", v);
      r.inputs.iterations = static_cast<int>(n);
    });
    add("verify", "bool", "check the result (Required) or not (Off)", [](Request& r, const Json& v) {
      r.verification = asBool("verify", v) ? Verification::Required : Verification::Off;
    });
    add("rtol", "number", "relative tolerance term", [](Request& r, const Json& v) { r.tolerances.rtol = asNumber("rtol", v); });
    add("atol", "number", "absolute tolerance term", [](Request& r, const Json& v) { r.tolerances.atol = asNumber("atol", v); });
    add("rtol_for", "numbers by output", "rtol of named outputs",
        [](Request& r, const Json& v) { r.tolerances.rtolFor = asNumbersByOutput("rtol_for", v); });
    add("atol_for", "numbers by output", "atol of named outputs",
        [](Request& r, const Json& v) { r.tolerances.atolFor = asNumbersByOutput("atol_for", v); });
    add("device", "string", "where verification and timing run: auto, cpu, cuda",
        [](Request& r, const Json& v) { r.device = asString("device", v); });
    // Target and mode.
    add("target", "string", "the device the result is for (auto: device)",
        [](Request& r, const Json& v) { r.target = asString("target", v); });
    add("prefer_bf16", "bool", "dtype=auto picks bf16 on CUDA too",
        [](Request& r, const Json& v) { r.preferBf16 = asBool("prefer_bf16", v); });
    add("assume_isa", "string", "decide as on a CPU of this level",
        [](Request& r, const Json& v) { r.assumeIsa = asString("assume_isa", v); });
    add("keep_training", "bool", "refuse a model in training mode",
        [](Request& r, const Json& v) { r.keepTraining = asBool("keep_training", v); });
    // Tune.
    add("tune", "bool", "decide machine-dependent rewrites by timing", [](Request& r, const Json& v) { r.tune = asBool("tune", v); });
    add("tune_budget", "number", "seconds for --tune",
        [](Request& r, const Json& v) { r.tuneBudgetSeconds = asNumber("tune_budget", v); });
    add("tune_threads", "thread counts", "intra-op thread counts --tune decides for: \"1,all\" or [1, 4]",
        [](Request& r, const Json& v) { r.tuneThreads = asThreadCounts("tune_threads", v); });
    add("tuning_cache", "string", "the tuning cache's file",
        [](Request& r, const Json& v) { r.tuningCache = asString("tuning_cache", v); });
    add("reproducible_clock", "bool", "decide on times that depend on the candidates' names only",
        [](Request& r, const Json& v) { r.reproducibleClock = asBool("reproducible_clock", v); });
    // Measure.
    add("measure", "bool", "time the result against the input (never slower)",
        [](Request& r, const Json& v) { r.measure = asBool("measure", v); });
    add("force", "bool", "keep a result that failed verification or is slower",
        [](Request& r, const Json& v) { r.force = asBool("force", v); });
    add("measure_budget", "number", "seconds per never-slower comparison", [](Request& r, const Json& v) {
      const double s = asNumber("measure_budget", v);
      if (!(s >= 0)) badType("measure_budget", "a non-negative number of seconds", v);
      r.measureBudgetSeconds = s;
    });
    add("measure_threads", "integer", "intra-op threads of the never-slower timing", [](Request& r, const Json& v) {
      const int64_t n = asInteger("measure_threads", v);
      if (n < 1) badType("measure_threads", "a positive integer", v);
      r.measureThreads = static_cast<int>(n);
    });
    add("work_threads", "integer", "intra-op threads of the untimed work (<= 0: LibTorch's count)",
        [](Request& r, const Json& v) { r.workThreads = static_cast<int>(asInteger("work_threads", v)); });
    return t;
  }();
  return entries;
}

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const std::vector<RequestOption>& requestOptions() {
  static const std::vector<RequestOption> options = [] {
    std::vector<RequestOption> out;
    for (const Entry& e : table()) out.push_back(e.option);
    return out;
  }();
  return options;
}

void setRequestOption(Request& request, const std::string& name, const nlohmann::json& value) {
  const Entry* closest = nullptr;
  size_t best = 4;  // suggest only a near miss
  for (const Entry& e : table()) {
    if (e.option.name == name) return e.set(request, value);
    const size_t d = editDistance(name, e.option.name);
    if (d < best) best = d, closest = &e;
  }
  throw RequestError("unknown option '" + name + "'" +
                     (closest ? " (did you mean '" + closest->option.name + "'?)" : std::string()));
}

void setRequestOptions(Request& request, const nlohmann::json& options) {
  if (!options.is_object()) throw RequestError("the options are not an object of name: value");
  for (const auto& [name, value] : options.items())
    if (!value.is_null()) setRequestOption(request, name, value);
}

}  // namespace ptopt::driver
