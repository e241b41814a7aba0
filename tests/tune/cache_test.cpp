// The tuning cache: decisions round-trip through the JSON file, any other
// context (device, LibTorch, threads) or signature (shape) misses, save()
// merges with what another run wrote, a damaged file is refused by name.
#include "ir/version.h"
#include "tests/support/fixtures.h"
#include "tune/cache.h"
#include "tune/measuring_device.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace ptopt;
namespace fs = std::filesystem;

namespace {

fs::path tempDir() { return test::processTempDir("ptopt_cache_test_"); }

tune::CacheContext context(int threads, const std::string& device = "cpu: Test CPU [avx2]") {
  tune::CacheContext c;
  c.device = device;
  c.libtorch = "1.13.0";
  c.ptopt = "0.1.0";
  c.threads = threads;
  return c;
}

tune::CachedDecision decision(const std::string& choice, double ratio) {
  tune::CachedDecision d;
  d.choice = choice;
  d.candidates = {"conv2d", "mkldnn"};
  d.ratio = ratio;
  d.low = ratio - 0.01;
  d.high = ratio + 0.01;
  d.rounds = 7;
  d.seconds = 0.25;
  return d;
}

const std::string kSig = "conv-kernel|aten::conv2d(float32[1,64,56,56]:cf, const float32[64,64,1,1]:cf, None, [1, 1], [0, 0], [1, 1], 1)";

}  // namespace

TEST_CASE("tuning cache decisions round-trip through the file") {
  const fs::path file = tempDir() / "sub" / "tuning.json";
  fs::remove_all(file.parent_path());
  tune::TuningCache cache(file.string());
  cache.store(context(1), kSig, decision("mkldnn", 0.8));
  cache.save();  // creates the folder
  REQUIRE(fs::exists(file));

  const tune::TuningCache back = tune::TuningCache::open(file.string());
  CHECK(back.size() == 1);
  auto hit = back.lookup(context(1), kSig);
  REQUIRE(hit);
  CHECK(hit->choice == "mkldnn");
  CHECK(hit->ratio == Approx(0.8));
  CHECK(hit->low == Approx(0.79));
  CHECK(hit->rounds == 7);
  CHECK(hit->candidates == std::vector<std::string>{"conv2d", "mkldnn"});
  CHECK_THAT(back.str(), Catch::Contains("mkldnn") && Catch::Contains("1 threads"));
  // No temporary file is left next to it.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(file.parent_path())) files += e.is_regular_file();
  CHECK(files == 1);
}

TEST_CASE("another thread count or device or LibTorch or ptopt or shape misses the cache") {
  tune::TuningCache cache;
  cache.store(context(1), kSig, decision("mkldnn", 0.8));
  CHECK(cache.lookup(context(1), kSig));
  CHECK_FALSE(cache.lookup(context(2), kSig));
  CHECK_FALSE(cache.lookup(context(1, "cpu: Other CPU [avx512_bf16]"), kSig));
  tune::CacheContext otherTorch = context(1);
  otherTorch.libtorch = "2.1.0";
  CHECK_FALSE(cache.lookup(otherTorch, kSig));
  tune::CacheContext newerPtopt = context(1);
  newerPtopt.ptopt = "0.2.0";
  CHECK_FALSE(cache.lookup(newerPtopt, kSig));
  CHECK(tune::CacheContext::current("cpu: Test CPU [avx2]").ptopt == ptopt::ptoptVersion());
  std::string otherShape = kSig;
  otherShape.replace(otherShape.find("56,56"), 5, "28,28");
  CHECK_FALSE(cache.lookup(context(1), otherShape));
}

TEST_CASE("saving merges with decisions another run wrote meanwhile") {
  const fs::path file = tempDir() / "merge.json";
  fs::remove(file);
  tune::TuningCache a = tune::TuningCache::open(file.string());
  tune::TuningCache b = tune::TuningCache::open(file.string());
  a.store(context(1), kSig, decision("mkldnn", 0.8));
  b.store(context(4), kSig, decision("conv2d", 1.0));
  a.save();
  b.save();
  const tune::TuningCache both = tune::TuningCache::open(file.string());
  CHECK(both.size() == 2);
  CHECK(both.contexts() == 2);
  CHECK(both.lookup(context(1), kSig)->choice == "mkldnn");
  CHECK(both.lookup(context(4), kSig)->choice == "conv2d");
}

TEST_CASE("a file that is not a tuning cache is refused by name") {
  const fs::path file = tempDir() / "bad.json";
  { std::ofstream(file) << "{ not json"; }
  CHECK_THROWS_WITH(tune::TuningCache::open(file.string()), Catch::Contains(file.string()) && Catch::Contains("not valid JSON"));
  { std::ofstream(file) << R"({"something": "else"})"; }
  CHECK_THROWS_WITH(tune::TuningCache::open(file.string()), Catch::Contains("not a ptopt tuning cache"));
  // A missing file is an empty cache.
  CHECK(tune::TuningCache::open((tempDir() / "missing.json").string()).size() == 0);
}

TEST_CASE("the default cache lives under XDG_CACHE_HOME or else ~/.cache") {
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
  CHECK(tune::TuningCache::defaultPath() == "/tmp/xdg-test/ptopt/tuning.json");
  ::unsetenv("XDG_CACHE_HOME");
  CHECK_THAT(tune::TuningCache::defaultPath(), Catch::EndsWith("/.cache/ptopt/tuning.json"));
  if (old) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
}

TEST_CASE("the device identity names the CPU and its ISA level") {
  const tune::MeasuringDevice id = tune::measuringDevice(c10::kCPU, std::nullopt);
  CHECK(id.kind == "cpu");
  CHECK_FALSE(id.name.empty());
  CHECK_FALSE(id.isa.empty());
  CHECK_THAT(id.str(), Catch::StartsWith("cpu: "));
  CHECK(tune::CacheContext::current(id.str()).key().find(" threads") != std::string::npos);
}
