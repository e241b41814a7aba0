#include "tune/cache.h"

#include "ir/version.h"
#include "tune/measuring_device.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace ptopt::tune {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "ptopt-tuning-cache";
constexpr int kVersion = 1;

nlohmann::json emptyCache() { return {{"format", kFormat}, {"version", kVersion}, {"contexts", nlohmann::json::object()}}; }

// The cache in `path`, or nullopt when there is no file.
std::optional<nlohmann::json> readCacheFile(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  if (!in) throw CacheError("cannot read tuning cache '" + path + "' (check its permissions)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw CacheError("tuning cache '" + path + "' is not valid JSON (" + e.what() +
                     "); remove it or run `ptopt tuning clear --tuning-cache " + path + "`");
  }
  if (!j.is_object() || j.value("format", "") != kFormat || !j.contains("contexts") || !j["contexts"].is_object())
    throw CacheError("'" + path + "' is not a ptopt tuning cache (no \"format\": \"" + kFormat + "\")");
  if (j.value("version", 0) != kVersion)
    throw CacheError(fmt::format("tuning cache '{}' has version {}, this ptopt reads version {}; clear it",
                                 path, j.value("version", 0), kVersion));
  return j;
}

}  // namespace

std::string CacheContext::key() const {
  const std::string confirmed =
      confirmedAt.empty() ? "" : fmt::format(", confirmed at {} threads", fmt::join(confirmedAt, ","));
  return fmt::format("{} | libtorch {} | ptopt {} | {} threads{}{}", device, libtorch, ptopt, threads, confirmed,
                     packsEachCall ? " | packs on every call (.pt2)" : "");
}

CacheContext CacheContext::current(const std::string& device) {
  CacheContext c;
  c.device = device;
  c.libtorch = libtorchVersion();
  c.ptopt = ptoptVersion();
  c.threads = at::get_num_threads();
  return c;
}

nlohmann::json CachedDecision::toJson() const {
  nlohmann::json j = {{"choice", choice}, {"candidates", candidates}, {"challenger", challenger}, {"ratio", ratio},
                      {"low", low},       {"high", high},             {"rounds", rounds},         {"seconds", seconds}};
  if (!detail.is_null()) j["detail"] = detail;
  return j;
}

CachedDecision CachedDecision::fromJson(const nlohmann::json& j) {
  CachedDecision d;
  d.choice = j.at("choice").get<std::string>();
  d.candidates = j.value("candidates", std::vector<std::string>{});
  d.challenger = j.value("challenger", std::string());
  d.ratio = j.value("ratio", 1.0);
  d.low = j.value("low", 1.0);
  d.high = j.value("high", 1.0);
  d.rounds = j.value("rounds", 0);
  d.seconds = j.value("seconds", 0.0);
  if (j.contains("detail")) d.detail = j.at("detail");
  return d;
}

TuningCache::TuningCache(std::string path) : path_(std::move(path)), j_(emptyCache()) {}

TuningCache TuningCache::open(const std::string& path) {
  TuningCache c(path);
  if (auto j = readCacheFile(path)) c.j_ = std::move(*j);
  return c;
}

std::string TuningCache::defaultPath() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "ptopt" / "tuning.json").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "ptopt" / "tuning.json").string();
  return (fs::temp_directory_path() / "ptopt-tuning.json").string();
}

std::optional<CachedDecision> TuningCache::lookup(const CacheContext& ctx, const std::string& signature) const {
  const auto& contexts = j_.at("contexts");
  auto c = contexts.find(ctx.key());
  if (c == contexts.end() || !c->is_object() || !c->contains("decisions")) return std::nullopt;
  const auto& decisions = c->at("decisions");
  auto d = decisions.find(signature);
  if (d == decisions.end()) return std::nullopt;
  try {
    return CachedDecision::fromJson(*d);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a damaged entry is measured again
  }
}

void TuningCache::store(const CacheContext& ctx, const std::string& signature, const CachedDecision& d) {
  auto& c = j_["contexts"][ctx.key()];
  if (!c.contains("device")) c = {{"device", ctx.device}, {"libtorch", ctx.libtorch}, {"ptopt", ctx.ptopt}, {"threads", ctx.threads},
                                  {"decisions", nlohmann::json::object()}};
  if (!ctx.confirmedAt.empty()) c["confirmed_at_threads"] = ctx.confirmedAt;
  c["decisions"][signature] = d.toJson();
}

size_t TuningCache::size() const {
  size_t n = 0;
  for (const auto& c : j_.at("contexts")) n += c.value("decisions", nlohmann::json::object()).size();
  return n;
}

size_t TuningCache::contexts() const { return j_.at("contexts").size(); }

void TuningCache::save() const {
  if (path_.empty()) return;
  nlohmann::json merged = emptyCache();
  try {
    if (auto onDisk = readCacheFile(path_)) merged = std::move(*onDisk);
  } catch (const CacheError&) {
    // An unreadable file is replaced by this run's cache.
  }
  const auto& mine = j_.at("contexts");
  for (auto c = mine.begin(); c != mine.end(); ++c) {
    auto& into = merged["contexts"][c.key()];
    if (!into.is_object() || !into.contains("decisions") || !c->contains("decisions")) {
      into = *c;
      continue;
    }
    const auto& decisions = c->at("decisions");
    for (auto d = decisions.begin(); d != decisions.end(); ++d) into["decisions"][d.key()] = *d;
  }
  const fs::path target(path_);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  const fs::path tmp = target.parent_path() / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()));
  {
    std::ofstream out(tmp);
    if (!out) throw CacheError("cannot write tuning cache '" + path_ + "' (check that its folder is writable)");
    out << merged.dump(1) << "\n";
    if (!out.flush()) {
      out.close();
      fs::remove(tmp, ec);
      throw CacheError("cannot write tuning cache '" + path_ + "' (disk full?)");
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw CacheError("cannot write tuning cache '" + path_ + "': " + ec.message());
  }
}

std::string TuningCache::str() const {
  std::ostringstream os;
  os << fmt::format("tuning cache {}: {} decisions in {} contexts\n", path_, size(), contexts());
  const auto& contexts = j_.at("contexts");
  for (auto c = contexts.begin(); c != contexts.end(); ++c) {
    os << c.key() << "\n";
    const nlohmann::json decisions = c->value("decisions", nlohmann::json::object());
    for (auto d = decisions.begin(); d != decisions.end(); ++d)
      os << fmt::format("  {:<12} {:<12} {:.2f}x [{:.2f}, {:.2f}]  {}\n", d->value("choice", std::string("?")),
                        d->value("challenger", std::string()), d->value("ratio", 1.0), d->value("low", 1.0),
                        d->value("high", 1.0), d.key());
  }
  return os.str();
}

}  // namespace ptopt::tune
