"""Timing and agreement helpers shared by the int8 benchmarks (bench/int8.py,
bench/int8_rnn.py)."""
import statistics
import time

import torch
import torch.nn.functional as F


def cpu_time(fn):
    """The process's CPU time of one call (steadier than wall time on a shared machine)."""
    t = time.process_time()
    fn()
    return time.process_time() - t


def measure(fns, reps):
    """{name: median CPU seconds}: every fn warmed up twice, then timed interleaved reps times."""
    for fn in fns.values():
        fn()
        fn()
    times = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            times[k].append(cpu_time(fn))
    return {k: statistics.median(v) for k, v in times.items()}


def agreement(ref, other, batches):
    """(worst cosine of the outputs, share of predictions, argmax over the last
    dimension, that agree) of `other` against `ref` on `batches`."""
    worst, agree, predictions = 1.0, 0, 0
    with torch.no_grad():
        for x in batches:
            a, b = ref(x), other(x)
            worst = min(worst, F.cosine_similarity(a.flatten(), b.flatten(), dim=0).item())
            agree += (a.argmax(-1) == b.argmax(-1)).sum().item()
            predictions += a.numel() // a.shape[-1]
    return worst, agree / predictions
