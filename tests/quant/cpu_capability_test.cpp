// The bf16 probe (quant/cpu_capability.h) against the kernel's view of the
// CPU, the oneDNN cap and PyTorch's oneDNN switch; and the policy that
// follows from it: cast{dtype=auto} on a CPU target lowers only with native
// bf16. Each machine checks the branch it is on, and every machine checks
// that a cap or the switch takes native bf16 away.
#include "quant/cpu_capability.h"
#include "verify/precision.h"
#include "target/capabilities.h"
#include "tests/support/fixtures.h"
#include "tests/support/pass_test.h"

#include "api/api.h"

#include <ATen/Context.h>
#include <catch2/catch.hpp>
#include <torch/cuda.h>

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
    CHECK(verify::lowestPrecisionIn(opt.model()) == c10::ScalarType::BFloat16);
  } else {
    CHECK(test::counter(report, "cast", "lowered") == 0);
    CHECK(test::counter(report, "cast", "casts") == 0);
    CHECK(declined);
    CHECK_FALSE(verify::lowestPrecisionIn(opt.model()).has_value());  // all fp32
  }

  // Emulation and an explicit dtype are not the CPU's business.
  Optimizer forced = Optimizer::load(f.path);
  rewriters::PassContext forcedCtx;
  forcedCtx.exampleInputs = ctx.exampleInputs;
  forced.run("-O1", &forcedCtx);
  CHECK(test::counter(forced.run("cast{dtype=bf16}", &forcedCtx), "cast", "lowered") == 21);
}

TEST_CASE("ISA levels: names, the CPUID level against /proc/cpuinfo, oneDNN caps") {
  for (auto isa : {target::CpuIsa::Default, target::CpuIsa::Avx2, target::CpuIsa::Avx512, target::CpuIsa::Avx512Bf16,
                   target::CpuIsa::Avx512Fp16, target::CpuIsa::Amx})
    CHECK(target::parseIsa(target::isaName(isa)) == isa);
  CHECK(target::parseIsa("AVX512_BF16") == target::CpuIsa::Avx512Bf16);
  CHECK_FALSE(target::parseIsa("avx1024").has_value());

  CHECK(target::onednnCapLevel("AVX2") == target::CpuIsa::Avx2);
  CHECK(target::onednnCapLevel("avx512_core") == target::CpuIsa::Avx512);
  CHECK(target::onednnCapLevel("AVX512_CORE_BF16") == target::CpuIsa::Avx512Bf16);
  CHECK_FALSE(target::onednnCapLevel("ALL").has_value());
  CHECK_FALSE(target::onednnCapLevel("AVX512_CORE_AMX").has_value());

  const target::CpuCapabilities real = target::probeCpu();
  INFO(real.summary());
  CHECK_FALSE(real.assumed);
  CHECK(real.isa == real.onednn);
  CHECK(static_cast<int>(real.onednn) <= static_cast<int>(real.cpuid));
  CHECK(static_cast<int>(real.aten) <= static_cast<int>(target::CpuIsa::Avx512));
  CHECK(real.nativeBf16 == quant::probeCpuBf16().native);
  CHECK_FALSE(real.brand.empty());
  if (const auto flags = procCpuFlags()) {
    const bool core = flags->count("avx512f") && flags->count("avx512bw") && flags->count("avx512vl") &&
                      flags->count("avx512dq");
    if (flags->count("amx_bf16") && flags->count("amx_tile") && core) CHECK(real.cpuid == target::CpuIsa::Amx);
    else if (flags->count("avx512_fp16") && core) CHECK(real.cpuid == target::CpuIsa::Avx512Fp16);
    else if (flags->count("avx512_bf16") && core) CHECK(real.cpuid == target::CpuIsa::Avx512Bf16);
    else if (core) CHECK(real.cpuid == target::CpuIsa::Avx512);
    else if (flags->count("avx2")) CHECK(real.cpuid == target::CpuIsa::Avx2);
  }
  {
    ScopedEnv onednn("ONEDNN_MAX_CPU_ISA", "avx2");
    const target::CpuCapabilities capped = target::probeCpu();
    CHECK(static_cast<int>(capped.isa) <= static_cast<int>(target::CpuIsa::Avx2));
    CHECK_FALSE(capped.nativeBf16);
    CHECK(target::deviceIdentity("cpu", std::nullopt).find("oneDNN " + target::isaName(capped.isa)) != std::string::npos);
  }
}

TEST_CASE("an assumed ISA replaces the probe for the decisions of its run only") {
  const target::CpuCapabilities real = target::probeCpu();
  const auto avx2 = target::assumedIsa("avx2");
  REQUIRE(avx2 == target::CpuIsa::Avx2);
  const target::CpuCapabilities c = target::cpuCapabilities(avx2);
  CHECK(c.assumed);
  CHECK(c.isa == target::CpuIsa::Avx2);
  CHECK(c.aten == target::CpuIsa::Avx2);
  CHECK_FALSE(c.nativeBf16);
  CHECK(c.bf16Why.find("assumed avx2") != std::string::npos);
  CHECK(target::deviceIdentity("cpu", avx2).find("assumed avx2") != std::string::npos);
  CHECK(target::autoPrecision("cpu", false, avx2).dtype == target::AutoPrecision::Dtype::Fp32);
  CHECK(target::autoPrecision("cpu", false, avx2).why.find("no native bf16") != std::string::npos);
  const auto amx = target::assumedIsa("amx");
  CHECK(target::cpuCapabilities(amx).nativeBf16);
  CHECK(target::cpuCapabilities(amx).aten == target::CpuIsa::Avx512);
  CHECK(target::autoPrecision("cpu", false, amx).dtype == target::AutoPrecision::Dtype::Bf16);
  // A CUDA target does not consult the CPU.
  CHECK(target::autoPrecision("cuda", false, avx2).dtype != target::AutoPrecision::Dtype::Fp32);
  // Nothing is left behind: with no level assumed, the probe.
  CHECK_FALSE(target::assumedIsa("").has_value());
  CHECK_FALSE(target::cpuCapabilities(std::nullopt).assumed);
  CHECK(target::cpuCapabilities(std::nullopt).isa == real.isa);
  CHECK(target::cpuCapabilities(std::nullopt).nativeBf16 == real.nativeBf16);
  CHECK(target::deviceIdentity("cpu", std::nullopt).find("assumed") == std::string::npos);
  CHECK_THROWS_WITH(target::assumedIsa("avx3"), Catch::Contains("unknown CPU level 'avx3'"));
}

TEST_CASE("CUDA capabilities: native fp16 from sm_70, bf16 from sm_80, and the probe", "[cuda]") {
  CHECK_FALSE(target::cudaNativeFp16(6, 1));
  CHECK(target::cudaNativeFp16(7, 5));
  CHECK_FALSE(target::cudaNativeBf16(7, 5));
  CHECK(target::cudaNativeBf16(8, 0));
  CHECK(target::cudaNativeBf16(9, 0));
  const target::CudaCapabilities c = target::probeCuda();
  if (!torch::cuda::is_available()) {
    CHECK_FALSE(c.available);
    CHECK_FALSE(c.why.empty());
    CHECK(target::deviceIdentity("cuda", std::nullopt).find("not available") != std::string::npos);
    // Nothing to probe: the CUDA rule assumes a current GPU.
    CHECK(target::autoPrecision("cuda", false, std::nullopt).dtype == target::AutoPrecision::Dtype::Fp16);
    CHECK(target::autoPrecision("cuda", true, std::nullopt).dtype == target::AutoPrecision::Dtype::Bf16);
    return;
  }
  INFO(c.summary());
  CHECK(c.available);
  CHECK_FALSE(c.name.empty());
  CHECK(c.major >= 3);
  CHECK(target::deviceIdentity("cuda", std::nullopt).find(c.name) != std::string::npos);
}
