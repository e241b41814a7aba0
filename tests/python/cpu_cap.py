"""The Python side of tests/support/cpu_cap.h and quant/cpu_capability.h.

follow_cpu_cap(): with oneDNN capped below AVX-512 (ONEDNN_MAX_CPU_ISA=AVX2,
or DNNL_MAX_CPU_ISA), switch PyTorch's oneDNN use off, as PyTorch itself does
for bf16 on a real CPU without AVX-512 (it decides by CPUID, so capped it would
send bf16 convs to a oneDNN that has no kernel for them).

native_bf16(): (bool, why) as ptopt's probe answers it: AVX512_BF16 or
AMX-BF16 (the kernel's flags), AVX-512 BW/VL/DQ, oneDNN built in and switched
on, and no oneDNN cap below avx512_core_bf16.
"""

import os

import torch

_NO_AVX512 = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2"}
_BELOW_BF16 = _NO_AVX512 | {"AVX512_MIC", "AVX512_MIC_4OPS", "AVX512_CORE", "AVX512_CORE_VNNI"}


def onednn_cap():
    for var in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        value = os.environ.get(var)
        if value:
            return value.upper()
    return None


def follow_cpu_cap():
    """Returns a one-line note when it switched oneDNN off, else None."""
    cap = onednn_cap()
    if cap in _NO_AVX512 and torch.backends.mkldnn.enabled:
        # Measured, not assumed: where PyTorch keeps bf16 convs off the capped
        # oneDNN itself (2.x asks oneDNN, which honours the cap; 1.13 with
        # cpuinfo capped too, scripts/avx2-cap.sh), oneDNN stays on.
        try:
            torch.nn.functional.conv2d(torch.ones(1, 8, 6, 6, dtype=torch.bfloat16),
                                       torch.ones(8, 8, 3, 3, dtype=torch.bfloat16))
            return None
        except RuntimeError:
            pass
        torch.backends.mkldnn.enabled = False
        return ("oneDNN capped to %s: PyTorch's oneDNN use switched off, as PyTorch does for bf16 "
                "on a real CPU without AVX-512" % cap)
    return None


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def native_bf16():
    flags = _cpu_flags()
    if not ({"avx512_bf16", "amx_bf16"} & flags):
        return False, "no AVX512_BF16 or AMX-BF16 instructions"
    if not {"avx512bw", "avx512vl", "avx512dq"} <= flags:
        return False, "LibTorch sends bf16 to oneDNN only with AVX-512 BW/VL/DQ"
    if not torch.backends.mkldnn.is_available():
        return False, "this PyTorch is built without oneDNN"
    cap = onednn_cap()
    if cap in _BELOW_BF16:
        return False, "oneDNN is capped below bf16 instructions (oneDNN ISA cap %s)" % cap
    if not torch.backends.mkldnn.enabled:
        return False, "PyTorch's oneDNN use is switched off"
    return True, "AVX512_BF16 or AMX-BF16 instructions, used by oneDNN"
