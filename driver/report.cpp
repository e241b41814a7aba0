#include "driver/report.h"

#include "ir/version.h"

#include <torch/version.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace ptopt::driver {

nlohmann::json versionsJson() {
  return {{"ptopt", ptoptVersion()},
          {"libtorch", std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                           std::to_string(TORCH_VERSION_PATCH)}};
}

nlohmann::json toJson(const RunRecord& r) {
  nlohmann::json j;
  j["command"] = r.command;
  j["versions"] = versionsJson();
  j["input"] = r.input;
  j["output"] = r.output;
  j["device"] = r.device;
  j["pipeline"] = r.pipeline;
  if (r.mode)
    j["mode"] = {{"training", r.mode->kind()},
                 {"optimized_in_eval_semantics", r.evalSemantics},
                 {"batch_norms_without_running_stats", r.mode->batchNormsWithoutStats},
                 {"notes", r.modeNotes}};
  nlohmann::json passes = nlohmann::json::array();
  if (r.passes)
    for (const auto& e : r.passes->executions) {
      nlohmann::json counters = nlohmann::json::object();
      for (const auto& [k, v] : e.result.counters) counters[k] = v;
      passes.push_back({{"index", e.index}, {"pass", e.pass}, {"method", e.method}, {"ran", e.ran},
                        {"changed", e.changed}, {"ms", e.ms}, {"counters", counters}});
    }
  j["passes"] = passes;
  nlohmann::json fixpoints = nlohmann::json::array();
  if (r.passes)
    for (const auto& f : r.passes->fixpoints)
      fixpoints.push_back({{"passes", f.passes}, {"method", f.method}, {"rounds", f.rounds},
                           {"max_iter", f.maxIterations}, {"converged", f.converged}});
  j["fixpoints"] = fixpoints;
  j["ops_before"] = r.opsBefore;
  j["ops_after"] = r.opsAfter;
  j["parameter_bytes"] = {{"before", r.parameterBytesBefore}, {"after", r.parameterBytesAfter}};
  j["file_bytes"] = {{"input", r.inputFileBytes ? nlohmann::json(*r.inputFileBytes) : nlohmann::json()},
                     {"output", r.outputFileBytes ? nlohmann::json(*r.outputFileBytes) : nlohmann::json()}};
  j["stage_ms"] = r.stageMs;
  if (r.verification) j["verification"] = r.verification->toJson();
  else j["verification"] = {{"skipped", r.verificationSkipped}};
  if (r.blamedPass) j["verification"]["first_failing_pass"] = *r.blamedPass;
  if (r.quantize) {
    const quant::QuantizeReport& q = *r.quantize;
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& op : q.ops) {
      nlohmann::json o = {{"op", op.op}, {"kind", op.kind}, {"fp32", op.fp32}};
      o["sqnr_db"] = std::isfinite(op.sqnrDb) ? nlohmann::json(op.sqnrDb) : nlohmann::json(nullptr);
      if (!op.why.empty()) o["why"] = op.why;
      ops.push_back(o);
    }
    j["quantize"] = {{"applied", q.applied}, {"mode", q.mode}, {"observer", q.observer}, {"engine", q.engine},
                     {"calibration", q.calibrationSource}, {"synthetic_calibration", q.syntheticCalibration},
                     {"calibration_batches", q.calibrationBatches}, {"held_out_batches", q.heldOutBatches},
                     {"threads", q.threads},
                     {"min_cosine", q.minCosine}, {"held_out_cosine", q.cosine}, {"ops", ops}};
    if (q.top1Agreement) j["quantize"]["held_out_top1_agreement"] = *q.top1Agreement;
    if (!q.declined.empty()) j["quantize"]["declined"] = q.declined;
  }
  if (r.tuning) j["tuning"] = *r.tuning;
  j["outcome"] = r.outcome;
  if (!r.error.empty()) j["error"] = r.error;
  j["exit_code"] = r.exitCode;
  for (const auto& [name, section] : r.sections) j[name] = section;
  return j;
}

void writeReport(const RunRecord& r, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path tmp = target.string() + ".ptopt-tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error("cannot write report '" + path + "' (check the folder exists and is writable)");
    out << toJson(r).dump(2) << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write report '" + path + "'");
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write report '" + path + "': " + ec.message());
  }
}

}  // namespace ptopt::driver
