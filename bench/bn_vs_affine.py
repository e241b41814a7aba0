"""Is an unfoldable BatchNorm faster as batch_norm or as a multiply-add?

Prints the time of inference batch_norm, addcmul(shift, x, scale) and
x * scale + shift on typical activation shapes, 1 thread, on this CPU. The
answer decides what bn-to-affine does by default (see its contract).
Usage: /usr/bin/python3 bench/bn_vs_affine.py
"""
import time

import torch

torch.set_num_threads(1)


def timed(f, n=200):
    for _ in range(20):
        f()
    start = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - start) / n * 1e6


print("%-18s %12s %12s %12s %10s" % ("shape", "batch_norm", "addcmul", "mul+add", "bn/addcmul"))
for shape in [(1, 64, 56, 56), (1, 256, 14, 14), (8, 32, 32, 32), (1, 512, 7, 7)]:
    x = torch.randn(*shape)
    c = shape[1]
    mean, var, w, b = torch.randn(c), torch.rand(c) + 0.5, torch.randn(c), torch.randn(c)
    scale = (w / torch.sqrt(var + 1e-5)).view(c, 1, 1)
    shift = (b - mean * w / torch.sqrt(var + 1e-5)).view(c, 1, 1)
    bn = timed(lambda: torch.batch_norm(x, w, b, mean, var, False, 0.1, 1e-5, True))
    ad = timed(lambda: torch.addcmul(shift, x, scale))
    ma = timed(lambda: x * scale + shift)
    print("%-18s %10.1fus %10.1fus %10.1fus %10.2f" % (shape, bn, ad, ma, bn / ad))
