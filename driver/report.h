// The machine-readable record of one `ptopt IN OUT` run (`--report R.json`),
// for CI systems: the command line, versions, device, pipeline, per-pass
// counters and times, op counts and parameter bytes before/after, stage
// times, the verification result per output, and the outcome.
#pragma once

#include "quant/quantize_report.h"

#include "ir/training_mode.h"
#include "rewriters/pass_manager.h"
#include "verify/runner.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::driver {

struct RunRecord {
  std::string command;
  std::string input, output;
  std::string device;
  std::string pipeline;
  std::optional<ir::TrainingMode> mode;  // how the model related to training mode when loaded
  bool evalSemantics = false;            // whether ptopt optimized it in eval semantics (training mode only)
  std::vector<std::string> modeNotes;    // what ptopt said about it
  std::optional<rewriters::RunReport> passes;
  std::map<std::string, size_t> opsBefore, opsAfter;
  size_t parameterBytesBefore = 0, parameterBytesAfter = 0;
  std::optional<uintmax_t> inputFileBytes, outputFileBytes;
  std::map<std::string, double> stageMs;  // load, import, passes, export, verify, save
  std::optional<verify::VerifyReport> verification;
  std::string verificationSkipped;  // why, when there is no verification
  std::optional<quant::QuantizeReport> quantize;  // what the quantize pass measured (per-op SQNR, cosine)
  std::optional<std::string> blamedPass;  // --verify-each: first pass that broke tolerance
  std::optional<nlohmann::json> tuning;  // --tune: the decisions (tune::TuneResult::toJson)
  std::string outcome;  // "passed", "failed", "written despite failure (--force)", "error"
  std::string error;
  int exitCode = 0;
  // More top-level sections by name: "target" (the device's capabilities,
  // target/capabilities.h), "measurement" (OUT timed against IN,
  // driver/measure.h).
  std::map<std::string, nlohmann::json> sections;
};

nlohmann::json toJson(const RunRecord& r);
// ptopt and LibTorch versions.
nlohmann::json versionsJson();
// Writes `r` as JSON to `path` (temporary file + rename). Throws on failure.
void writeReport(const RunRecord& r, const std::string& path);

}  // namespace ptopt::driver
