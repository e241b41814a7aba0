// The tuning cache: measured decisions in a JSON file, so that a second
// `--tune` of the same model (or of another model with the same ops) times
// nothing it has timed before, like cuDNN's benchmark mode within a process,
// but across runs.
//
// Contract. A decision is stored under a context (the device's identity,
// tune/measuring_device.h; the LibTorch version; ptopt's own version, since a newer
// ptopt may build other candidates; the intra-op thread count) and its
// op signature (tune/signature.h: op, shapes, dtypes, memory formats,
// arguments; or, for a whole-model decision, a digest of the graph and its
// input shapes). A lookup under any other context or signature misses, so a
// different machine, LibTorch, ptopt, thread count or shape re-tunes. The file is
//   {"format": "ptopt-tuning-cache", "version": 1,
//    "contexts": {"<context>": {"device": ..., "libtorch": ..., "ptopt": ..., "threads": N,
//                               "decisions": {"<signature>": {"choice": ...,
//                                 "candidates": [...], "ratio": r, "low": l,
//                                 "high": h, "rounds": n, "seconds": s}}}}}
// save() merges with what the file holds by then (another ptopt may have
// written it meanwhile; this run's entries win) and writes it atomically: a
// temporary file in the same folder, then a rename, so a reader never sees a
// partial file. A file that is not such JSON is refused by open()
// (CacheError, naming the file); the caller may start empty instead.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ptopt::tune {

class CacheError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CacheContext {
  std::string device;    // MeasuringDevice::str()
  std::string libtorch;  // "1.13.0"
  std::string ptopt;     // ptoptVersion(): a newer ptopt re-tunes
  int threads = 1;
  std::vector<int> confirmedAt;  // TuneOptions::alsoAtThreads: other counts whole-model choices hold at
  // OUT is a program (.pt2): packed weights are computed on every call, not
  // at load, and timed so (the same graph times differently).
  bool packsEachCall = false;
  // "<device> | libtorch <v> | ptopt <v> | <n> threads[, confirmed at <m>[,<k>] threads][ | packs on every call]"
  std::string key() const;
  // The context of this process on `device` (MeasuringDevice::str()): this LibTorch and ptopt, at::get_num_threads().
  static CacheContext current(const std::string& device);
};

struct CachedDecision {
  std::string choice;                   // the chosen candidate's name
  std::vector<std::string> candidates;  // every candidate's name, the baseline first
  std::string challenger;               // the winner, else the best alternative
  double ratio = 1, low = 1, high = 1;  // the challenger over the baseline
  int rounds = 0;
  double seconds = 0;  // time spent measuring it
  // More of what was measured, for decisions that need it (the never-slower
  // verdict, driver/measure_cache.h: every candidate tried); null when none.
  nlohmann::json detail;
  nlohmann::json toJson() const;
  static CachedDecision fromJson(const nlohmann::json& j);
};

class TuningCache {
 public:
  // An empty cache that save() writes to `path`.
  explicit TuningCache(std::string path = "");
  // Reads `path`; a missing file is an empty cache. Throws CacheError when the
  // file exists but is not a tuning cache.
  static TuningCache open(const std::string& path);
  // $XDG_CACHE_HOME/ptopt/tuning.json, else ~/.cache/ptopt/tuning.json.
  static std::string defaultPath();

  std::optional<CachedDecision> lookup(const CacheContext& ctx, const std::string& signature) const;
  void store(const CacheContext& ctx, const std::string& signature, const CachedDecision& d);
  // Decisions in all contexts.
  size_t size() const;
  size_t contexts() const;
  const std::string& path() const { return path_; }
  const nlohmann::json& json() const { return j_; }
  // Merge with the file, then write atomically (creates the folder). Throws
  // CacheError when it cannot be written.
  void save() const;
  // A readable listing: per context, one line per decision.
  std::string str() const;

 private:
  std::string path_;
  nlohmann::json j_;
};

}  // namespace ptopt::tune
