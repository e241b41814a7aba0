// The bf16 probe (quant/cpu_capability.h) against the kernel's view of the
// CPU, the oneDNN cap and PyTorch's oneDNN switch; and the policy that
// follows from it: cast{dtype=auto} on a CPU target lowers only with native
// bf16. Each machine checks the branch it is on, and every machine checks
// that a cap or the switch takes native bf16 away.
#include "quant/cpu_capability.h"
#include "quant/precision_check.h"
#include "tests/support/fixtures.h"
#include "tests/support/pass_test.h"

#include "tools/api.h"

#include <ATen/Context.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

using namespace ptopt;

namespace {

// The flags of the first processor in /proc/cpuinfo (Linux x86), or nullopt.
std::optional<std::set<std::string>> procCpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::set<std::string> flags;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return std::nullopt;
}

// Sets an environment variable for the scope (restores the old value).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("the CPUID probe agrees with the kernel's /proc/cpuinfo flags") {
#if !(defined(__x86_64__) || defined(__i386__))
  WARN("SKIPPED: not an x86 CPU");
  return;
#endif
  const auto flags = procCpuFlags();
  if (!flags) {
    WARN("SKIPPED: no /proc/cpuinfo flags here");
    return;
  }
  // The kernel lists a flag only when it also enabled the state it needs.
  const quant::X86Features f = quant::probeX86Features();
  CHECK(f.avx2 == flags->count("avx2"));
  CHECK((f.avx512f && f.osAvx512) == flags->count("avx512f"));
  CHECK((f.avx512bw && f.osAvx512) == flags->count("avx512bw"));
  CHECK((f.avx512vl && f.osAvx512) == flags->count("avx512vl"));
  CHECK((f.avx512bf16 && f.osAvx512) == flags->count("avx512_bf16"));
  CHECK((f.amxBf16 && f.osAmx) == flags->count("amx_bf16"));
}

TEST_CASE("oneDNN ISA caps below avx512_core_bf16 rule native bf16 out") {
  for (const char* cap : {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI"})
    CHECK_FALSE(quant::onednnCapAllowsNativeBf16(cap));
  for (const char* cap : {"AVX512_CORE_BF16", "AVX512_CORE_AMX", "ALL"}) CHECK(quant::onednnCapAllowsNativeBf16(cap));

  {
    ScopedEnv onednn("ONEDNN_MAX_CPU_ISA", "avx2");
    CHECK(quant::onednnIsaCap() == "AVX2");  // upper-cased
    const auto capped = quant::probeCpuBf16();
    INFO(capped.why);
    CHECK_FALSE(capped.native);
  }
  {
    ScopedEnv onednn("ONEDNN_MAX_CPU_ISA", "ALL");
    ScopedEnv dnnl("DNNL_MAX_CPU_ISA", "AVX2");  // ONEDNN_ wins, as in oneDNN
    CHECK(quant::onednnIsaCap() == "ALL");
  }
  // PyTorch's switch: without oneDNN, bf16 runs in ATen's kernels.
  const bool was = at::globalContext().userEnabledMkldnn();
  at::globalContext().setUserEnabledMkldnn(false);
  const auto off = quant::probeCpuBf16();
  at::globalContext().setUserEnabledMkldnn(was);
  CHECK_FALSE(off.native);

  // Native needs the instructions.
  const quant::X86Features f = quant::probeX86Features();
  if (quant::probeCpuBf16().native) CHECK(((f.avx512bf16 && f.osAvx512) || (f.amxBf16 && f.osAmx)));
}

TEST_CASE("cast{dtype=auto} on a CPU lowers to bf16 only where bf16 is native") {
  const auto& f = test::fixture("resnet18_script");
  const quant::CpuBf16Support cpu = quant::probeCpuBf16();
  INFO("this process: " << (cpu.native ? "native bf16, " : "no native bf16, ") << cpu.why);
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1", &ctx);
  auto report = opt.run("cast{dtype=auto}", &ctx);
  bool declined = false;
  for (const auto& d : ctx.declines())
    declined = declined || d.find("dtype=auto keeps the whole graph in fp32") != std::string::npos;
  if (cpu.native) {
    CHECK(test::counter(report, "cast", "lowered") == 21);
    CHECK_FALSE(declined);
    CHECK(quant::lowestPrecisionIn(opt.model()) == c10::ScalarType::BFloat16);
  } else {
    CHECK(test::counter(report, "cast", "lowered") == 0);
    CHECK(test::counter(report, "cast", "casts") == 0);
    CHECK(declined);
    CHECK_FALSE(quant::lowestPrecisionIn(opt.model()).has_value());  // all fp32
  }

  // Emulation and an explicit dtype are not the CPU's business.
  Optimizer forced = Optimizer::load(f.path);
  rewriters::PassContext forcedCtx;
  forcedCtx.exampleInputs = ctx.exampleInputs;
  forced.run("-O1", &forcedCtx);
  CHECK(test::counter(forced.run("cast{dtype=bf16}", &forcedCtx), "cast", "lowered") == 21);
}
