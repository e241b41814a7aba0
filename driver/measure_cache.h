// The never-slower verdict in the tuning cache: a warm `--tune` run that
// produces the same OUT from the same IN on the same machine reuses the
// verdict an earlier run measured instead of timing again (issue 20: a second
// `--tune` run takes at most 30% of the first; the measure stage, 2 s by
// default, dominated it).
//
// Contract. A verdict is stored in the tuning cache (tune/cache.h) under the
// context of the measurement (the device's identity, tune/measuring_device.h; the
// LibTorch version; the intra-op thread count the timing ran with) and a
// signature made of
//   - a digest of IN's bytes and a digest of the bytes of the OUT archive
//     (ptopt's archives are deterministic: the same model, pipeline and
//     LibTorch give the same bytes),
//   - the timed inputs' dtypes and shapes,
//   - the measurement settings (budget, executor, margin).
// Anything else misses, so a different model, result, machine, LibTorch,
// thread count or input shape is timed again. What is stored is what the
// measure stage found: every candidate it tried with its measurement, the
// one written (and, for the fp32 structure, a digest of its bytes: a warm
// run rebuilds and verifies it, and times it again when its bytes differ),
// and whether it ran under --force (then only OUT was timed: a warm run
// without --force whose cached OUT was slower times the fallbacks).
// Verification is never cached: it runs every time.
#pragma once

#include "driver/measure.h"

#include "target/capabilities.h"
#include "tune/cache.h"

#include <c10/core/Device.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptopt {

// A digest of `bytes` ("<size>-<16 hex digits>"): fast (a few GB/s), not
// cryptographic; keys cache entries.
std::string bytesDigest(std::string_view bytes);
// bytesDigest of a file's contents; throws std::runtime_error when it
// cannot be read.
std::string fileDigest(const std::string& path);

// The --report form of a measurement ("ratio", "ci95", "pairs", "threads",
// "in_median_ms", "candidate_median_ms", "seconds", "verdict") and back.
nlohmann::json speedToJson(const SpeedMeasurement& m);
SpeedMeasurement speedFromJson(const nlohmann::json& j);

// "float[1,3,224,224], int64[2]": the timed inputs.
std::string describeInputs(const std::vector<c10::IValue>& inputs);

struct VerdictKey {
  std::string device;   // tune::measuringDevice(device).str()
  int threads = 1;      // intra-op threads while timing
  std::string inDigest, outDigest;
  std::string inputs;   // describeInputs
  std::string settings; // "budget 2 s, plain executor, margin 0.02"
  tune::CacheContext context() const;
  std::string signature() const;
};
// `assumed`: the run's assumed CPU level (--assume-isa), in the device key.
VerdictKey verdictKey(c10::Device device, std::optional<target::CpuIsa> assumed, const MeasureOptions& options,
                      std::string inDigest, std::string outDigest, const std::vector<c10::IValue>& inputs);

struct CachedVerdict {
  NeverSlowerResult picked;     // indices refer to `names`
  std::vector<std::string> names;  // the candidates in order (tried or not)
  std::string writtenDigest;    // bytesDigest of the fp32 structure when it was written
  bool forced = false;          // measured with --force: only OUT was timed
  double seconds = 0;           // time the measurement took then
  std::string chosenName() const { return names.at(picked.chosen); }
};

// Reads and writes verdicts in a tuning cache.
std::optional<CachedVerdict> lookupVerdict(const tune::TuningCache& cache, const VerdictKey& key);
void storeVerdict(tune::TuningCache& cache, const VerdictKey& key, const CachedVerdict& verdict);

// The cached verdict as it applies to a run with `candidates` (in order) and
// `force`: nullopt when it does not (a candidate the cache chose is not
// offered now; or it was measured under --force, OUT was slower and this run
// needs the fallbacks). With `force`, only OUT's measurement is kept and OUT
// is chosen.
std::optional<NeverSlowerResult> applyCachedVerdict(const CachedVerdict& cached,
                                                    const std::vector<Candidate>& candidates, bool force);

// The candidates a choice tried, as the record and the cache keep them:
// [{"candidate", the measurement's fields (speedToJson), "error"}, ...].
nlohmann::json triedToJson(const std::vector<CandidateOutcome>& tried);

// The measure stage's verdicts in one tuning cache under one key: what it
// asks before timing, and what it keeps after.
class VerdictCache {
 public:
  // nullopt when the cache cannot be read (the tune stage has warned about
  // a damaged one; the stage then times as usual).
  static std::optional<VerdictCache> open(const std::string& path, VerdictKey key);

  // The cached verdict for a run with `candidates` and `force`, when one
  // applies. When it chose the fp32 structure, that candidate is rebuilt
  // and verified (never cached: its build throws when it fails) and
  // `builtDigest` (bytesDigest of what it built) must match what was
  // written then.
  std::optional<NeverSlowerResult> recall(const std::vector<Candidate>& candidates, bool force,
                                          const std::function<std::string()>& builtDigest) const;
  // Keeps what a run measured (not a comparison that fitted too few pairs
  // in the budget: it decided nothing). `builtDigest` as for recall, asked
  // only when the fp32 structure is chosen. Throws tune::CacheError when the
  // cache cannot be saved.
  void remember(const NeverSlowerResult& picked, const std::vector<Candidate>& candidates, bool forced,
                double seconds, const std::function<std::string()>& builtDigest);

  const std::string& path() const { return cache_.path(); }

 private:
  VerdictCache(tune::TuningCache cache, VerdictKey key) : cache_(std::move(cache)), key_(std::move(key)) {}
  tune::TuningCache cache_;
  VerdictKey key_;
};

}  // namespace ptopt
