#include "driver/measure_cache.h"

#include "ir/version.h"
#include "tune/measuring_device.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace ptopt {

namespace {

constexpr uint64_t kP1 = 0x9e3779b97f4a7c15ull, kP2 = 0xc2b2ae3d27d4eb4full, kP3 = 0x165667b19e3779f9ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t load64(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
inline uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

// Incremental digest: four independent lanes over 32-byte blocks (so the
// multiplies overlap), the tail byte by byte, then a final mix.
class Digest {
 public:
  void add(const char* p, size_t n) {
    size_ += n;
    while (n > 0 && pending_ > 0) {  // complete a partial block first
      block_[pending_++] = *p++;
      --n;
      if (pending_ == 32) {
        round(block_);
        pending_ = 0;
      }
    }
    for (; n >= 32; p += 32, n -= 32) round(p);
    for (; n > 0; --n) block_[pending_++] = *p++;
  }
  std::string hex() const {
    uint64_t h = rotl(lane_[0], 1) ^ rotl(lane_[1], 7) ^ rotl(lane_[2], 12) ^ rotl(lane_[3], 18);
    h ^= size_ * kP1;
    for (size_t i = 0; i < pending_; ++i) h = rotl(h ^ (uint64_t(uint8_t(block_[i])) * kP3), 11) * kP1;
    return fmt::format("{}-{:016x}", size_, mix(h));
  }

 private:
  void round(const char* p) {
    for (int l = 0; l < 4; ++l) lane_[l] = rotl(lane_[l] ^ (load64(p + 8 * l) * kP2), 31) * kP1;
  }
  uint64_t lane_[4] = {kP1, kP2, kP3, kP1 ^ kP2};
  uint64_t size_ = 0;
  char block_[32] = {};
  size_t pending_ = 0;
};

constexpr const char* kKind = "never-slower";

}  // namespace

std::string bytesDigest(std::string_view bytes) {
  Digest d;
  d.add(bytes.data(), bytes.size());
  return d.hex();
}

std::string fileDigest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  Digest d;
  std::vector<char> buffer(size_t{1} << 20);
  while (in) {
    in.read(buffer.data(), std::streamsize(buffer.size()));
    d.add(buffer.data(), size_t(in.gcount()));
  }
  if (in.bad()) throw std::runtime_error("cannot read '" + path + "'");
  return d.hex();
}

nlohmann::json speedToJson(const SpeedMeasurement& m) {
  return nlohmann::json{{"ratio", m.ratio.median},      {"ci95", {m.ratio.low, m.ratio.high}},
                        {"pairs", m.pairs},             {"threads", m.threads},
                        {"in_median_ms", m.a.medianMs}, {"candidate_median_ms", m.b.medianMs},
                        {"seconds", m.seconds},         {"verdict", verdictName(m.verdict)},
                        {"too_few_pairs", m.tooFewPairs}, {"futile", m.futile}};
}

SpeedMeasurement speedFromJson(const nlohmann::json& j) {
  SpeedMeasurement m;
  m.ratio.median = j.at("ratio").get<double>();
  m.ratio.low = j.at("ci95").at(0).get<double>();
  m.ratio.high = j.at("ci95").at(1).get<double>();
  m.pairs = j.at("pairs").get<size_t>();
  m.threads = j.at("threads").get<int>();
  m.a.medianMs = j.at("in_median_ms").get<double>();
  m.b.medianMs = j.at("candidate_median_ms").get<double>();
  m.a.runs = m.b.runs = m.pairs;
  m.seconds = j.value("seconds", 0.0);
  const std::string v = j.at("verdict").get<std::string>();
  m.verdict = v == "faster" ? SpeedVerdict::Faster : v == "slower" ? SpeedVerdict::Slower : SpeedVerdict::NoClearDifference;
  return m;
}

std::string describeInputs(const std::vector<c10::IValue>& inputs) {
  std::string s;
  for (const auto& v : inputs) {
    if (!s.empty()) s += ", ";
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      s += fmt::format("{}[{}]", c10::toString(t.scalar_type()), fmt::join(t.sizes(), ","));
      if (!t.is_contiguous() && t.dim() == 4 && t.is_contiguous(c10::MemoryFormat::ChannelsLast)) s += " channels-last";
    } else {
      s += v.tagKind();
    }
  }
  return s;
}

tune::CacheContext VerdictKey::context() const {
  tune::CacheContext c;
  c.device = device;
  c.libtorch = tune::libtorchVersion();
  c.ptopt = ptoptVersion();
  c.threads = threads;
  return c;
}

std::string VerdictKey::signature() const {
  return fmt::format("{} in {} out {} inputs ({}) {}", kKind, inDigest, outDigest, inputs, settings);
}

VerdictKey verdictKey(c10::Device device, std::optional<target::CpuIsa> assumed, const MeasureOptions& o,
                      std::string inDigest, std::string outDigest, const std::vector<c10::IValue>& inputs) {
  VerdictKey k;
  k.device = tune::measuringDevice(device, assumed).str();
  k.threads = o.threads > 0 ? o.threads : at::get_num_threads();
  k.inDigest = std::move(inDigest);
  k.outDigest = std::move(outDigest);
  k.inputs = describeInputs(inputs);
  k.settings = fmt::format("budget {:g} s, {} executor, margin {:g}", o.budgetSeconds,
                           o.optimizingExecutor ? "optimizing" : "plain", o.margin);
  return k;
}

std::optional<CachedVerdict> lookupVerdict(const tune::TuningCache& cache, const VerdictKey& key) {
  const std::optional<tune::CachedDecision> d = cache.lookup(key.context(), key.signature());
  if (!d || !d->detail.is_object()) return std::nullopt;
  try {
    CachedVerdict v;
    const nlohmann::json& j = d->detail;
    v.names = d->candidates;
    v.forced = j.value("forced", false);
    v.writtenDigest = j.value("written_digest", std::string());
    v.seconds = d->seconds;
    for (const auto& t : j.at("tried")) {
      CandidateOutcome o{t.at("candidate").get<std::string>(), std::nullopt, t.value("error", std::string())};
      if (t.contains("ratio")) o.measurement = speedFromJson(t);
      v.picked.tried.push_back(std::move(o));
    }
    v.picked.chosen = j.at("chosen").get<size_t>();
    if (v.picked.tried.empty() || v.picked.chosen >= v.names.size() || v.picked.tried.size() > v.names.size())
      return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged entry is measured again
  }
}

void storeVerdict(tune::TuningCache& cache, const VerdictKey& key, const CachedVerdict& v) {
  tune::CachedDecision d;
  d.candidates = v.names;
  d.choice = v.chosenName();
  d.challenger = v.names.front();  // OUT, against IN
  if (const auto& m = v.picked.tried.front().measurement) {
    d.ratio = m->ratio.median;
    d.low = m->ratio.low;
    d.high = m->ratio.high;
    d.rounds = int(m->pairs);
  }
  d.seconds = v.seconds;
  d.detail = {{"kind", kKind}, {"tried", triedToJson(v.picked.tried)}, {"chosen", v.picked.chosen}, {"forced", v.forced}};
  if (!v.writtenDigest.empty()) d.detail["written_digest"] = v.writtenDigest;
  cache.store(key.context(), key.signature(), d);
}

std::optional<NeverSlowerResult> applyCachedVerdict(const CachedVerdict& cached,
                                                    const std::vector<Candidate>& candidates, bool force) {
  if (candidates.empty()) return std::nullopt;
  const CandidateOutcome& out = cached.picked.tried.front();
  if (out.name != candidates.front().name) return std::nullopt;
  NeverSlowerResult r;
  if (force) {  // OUT is written whatever it measured
    r.tried.push_back(out);
    r.chosen = 0;
    return r;
  }
  if (cached.forced && cached.picked.tried.size() == 1 &&
      (!out.measurement || out.measurement->verdict == SpeedVerdict::Slower))
    return std::nullopt;  // the fallbacks were never tried
  // The same candidates, in the same order, up to the chosen one.
  if (candidates.size() < cached.picked.tried.size()) return std::nullopt;
  for (size_t i = 0; i < cached.picked.tried.size(); ++i)
    if (candidates[i].name != cached.picked.tried[i].name) return std::nullopt;
  r = cached.picked;
  r.chosen = r.tried.size() - 1;
  if (r.chosen >= candidates.size() || candidates[r.chosen].name != cached.chosenName()) return std::nullopt;
  return r;
}

nlohmann::json triedToJson(const std::vector<CandidateOutcome>& tried) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : tried) {
    nlohmann::json j = {{"candidate", t.name}};
    if (t.measurement) j.update(speedToJson(*t.measurement));
    if (!t.error.empty()) j["error"] = t.error;
    out.push_back(j);
  }
  return out;
}

namespace {
constexpr const char* kFp32Structure = "fp32 structure";  // the candidate whose bytes are kept
}  // namespace

std::optional<VerdictCache> VerdictCache::open(const std::string& path, VerdictKey key) {
  try {
    return VerdictCache(tune::TuningCache::open(path), std::move(key));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<NeverSlowerResult> VerdictCache::recall(const std::vector<Candidate>& candidates, bool force,
                                                      const std::function<std::string()>& builtDigest) const {
  const std::optional<CachedVerdict> hit = lookupVerdict(cache_, key_);
  if (!hit) return std::nullopt;
  std::optional<NeverSlowerResult> picked = applyCachedVerdict(*hit, candidates, force);
  if (!picked || candidates[picked->chosen].name != kFp32Structure) return picked;
  try {
    candidates[picked->chosen].build();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (builtDigest() != hit->writtenDigest) return std::nullopt;
  return picked;
}

void VerdictCache::remember(const NeverSlowerResult& picked, const std::vector<Candidate>& candidates, bool forced,
                            double seconds, const std::function<std::string()>& builtDigest) {
  const auto& first = picked.tried.front().measurement;
  if (first && first->tooFewPairs) return;
  CachedVerdict v;
  v.picked = picked;
  for (const auto& c : candidates) v.names.push_back(c.name);
  if (candidates[picked.chosen].name == kFp32Structure) v.writtenDigest = builtDigest();
  v.forced = forced;
  v.seconds = seconds;
  storeVerdict(cache_, key_, v);
  cache_.save();
}

}  // namespace ptopt
