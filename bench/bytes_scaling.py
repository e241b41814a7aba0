#!/usr/bin/python3
"""Bytes scaling: ptopt's time per GB and peak memory on models of growing size.

Beside bench/import_scaling.sh (depth), this grows the bytes: wide
Linear(4096)+BatchNorm1d+ReLU stacks scripted in eval mode, and a conv net
with wide channels, at 0.25, 1 and 4 GB by default. For each model it runs

  python   torch.jit.load + torch.jit.freeze + torch.jit.save (the yardstick)
  py+fsync the same, then fsync of the file: the durability ptopt gives OUT
           before it replaces anything (torch.jit.save leaves the bytes in
           the page cache)
  copy     ptopt IN OUT --passes '' --no-verify
  O1       ptopt IN OUT (-O1, verified)

under /usr/bin/time -v, and prints wall time, seconds per GB, peak RSS as a
multiple of the model's bytes, the ratio to Python's wall time, and ptopt's
stage times (load, import, passes, export, verify, save) per GB.

Targets (issue 25): on 1 GB, copy <= 1.5x Python and O1 <= 2x Python;
peak RSS <= 2x the model (copy) and <= 2.5x (O1); time per GB flat from
0.25 to 4 GB. Needs about 3.5x the largest model in free disk.

`--kinds resnet50` is the end-to-end line (issue 37): torchvision's
resnet50 (random weights, scripted) at its real size, whatever --sizes says.
With --measure (the default run of `ptopt IN OUT`: verified and measured)
the targets are resnet50 -O1 within 2.5x of Python's load+freeze+save, and
the 1 GB linear model within 2x with peak RSS within 2.5x of the file.

Every run starts after os.sync(), untimed, so that none pays for the
writeback of the one before it. With --repeat N the runs go round-robin N times (interleaved, so a
busy machine slows them alike) and each row shows the median wall time and
the largest peak RSS. The O1 run passes --no-measure: the never-slower
timing of OUT against IN is a fixed budget (--measure-budget, 2 s), not a
cost per byte; --measure keeps it.

  bench/bytes_scaling.py [--ptopt build/tools/ptopt] [--sizes 0.25,1,4] [--kinds linear,conv] [--work DIR]
                         [--repeat N] [--measure]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

MAKE_MODEL = r'''
import sys, torch, torch.nn as nn
kind, gb, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
def bn_with_stats(bn):
    bn.running_mean.uniform_(-0.1, 0.1); bn.running_var.uniform_(0.5, 1.5)
    return bn
if kind == "resnet50":  # the end-to-end line: a real model at its real size (gb is ignored)
    import torchvision
    m = torchvision.models.resnet50().eval()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            bn_with_stats(mod)
    torch.jit.save(torch.jit.script(m), out)
    print("1,3,224,224")
    sys.exit(0)
if kind == "linear":
    width = 4096
    layers = max(1, round(gb * 1e9 / (width * width * 4)))
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), bn_with_stats(nn.BatchNorm1d(width)), nn.ReLU()]
    shape = [8, width]
else:
    ch = 1024  # 3x3 convs of 1024 channels: 37.7 MB each
    layers = max(1, round(gb * 1e9 / (ch * ch * 9 * 4)))
    mods = [nn.Conv2d(3, ch, 3, padding=1)]
    for _ in range(layers):
        mods += [nn.Conv2d(ch, ch, 3, padding=1), bn_with_stats(nn.BatchNorm2d(ch)), nn.ReLU()]
    shape = [1, 3, 8, 8]
m = nn.Sequential(*mods).eval()
torch.jit.save(torch.jit.script(m), out)
print(",".join(map(str, shape)))
'''

PYTHON_FREEZE = r'''
import sys, torch
m = torch.jit.load(sys.argv[1]); f = torch.jit.freeze(m.eval()); torch.jit.save(f, sys.argv[2])
'''

# The same, with the guarantee ptopt gives before OUT replaces anything: the
# bytes on disk (torch.jit.save leaves them in the page cache).
PYTHON_FREEZE_DURABLE = PYTHON_FREEZE + r'''
import os
fd = os.open(sys.argv[2], os.O_RDONLY); os.fsync(fd); os.close(fd)
'''

STAGES = ["load", "import", "passes", "export", "verify", "measure", "save"]


def timed(cmd):
    """(wall seconds, peak RSS bytes, stdout+stderr) of cmd under /usr/bin/time -v."""
    run = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    text = run.stdout + run.stderr
    if run.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(cmd), run.returncode, text[-3000:]))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text)
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) * 1024
    return seconds, rss, text


def stage_times(text):
    m = re.search(r"^time: (.*)$", text, re.M)
    out = {}
    if m:
        for name, ms in re.findall(r"(\w+) (\d+) ms", m.group(1)):
            out[name] = int(ms) / 1000.0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ptopt", default="build/tools/ptopt")
    ap.add_argument("--sizes", default="0.25,1,4")
    ap.add_argument("--kinds", default="linear,conv")
    ap.add_argument("--work", default=None, help="folder for the models (default: a temporary one)")
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved rounds per model (median wall, largest RSS)")
    ap.add_argument("--measure", action="store_true", help="keep O1's never-slower timing (a fixed budget)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="ptopt-bytes-")
    os.makedirs(work, exist_ok=True)
    rows = []
    header = "%-8s %5s %8s | %-8s %8s %7s %9s %8s %8s | %s" % (
        "model", "GB", "bytes", "run", "wall_s", "s/GB", "rss/bytes", "vs_py", "vs_pyfs",
        "stages s/GB (" + " ".join(STAGES) + ")")
    print(header)
    print("-" * len(header))
    try:
        for kind in args.kinds.split(","):
            for size in ([0.0] if kind == "resnet50" else map(float, args.sizes.split(","))):
                model = os.path.join(work, "%s_%g.pt" % (kind, size))
                shape = subprocess.run(["/usr/bin/python3", "-c", MAKE_MODEL, kind, str(size), model],
                                       capture_output=True, text=True, check=True).stdout.strip()
                nbytes = os.path.getsize(model)
                gb = nbytes / 1e9
                out = os.path.join(work, "out.pt")
                runs = [
                    ("python", ["/usr/bin/python3", "-c", PYTHON_FREEZE, model, out]),
                    ("py+fsync", ["/usr/bin/python3", "-c", PYTHON_FREEZE_DURABLE, model, out]),
                    ("copy", [args.ptopt, model, out, "--passes", "", "--no-verify", "--overwrite", "-v"]),
                    ("O1", [args.ptopt, model, out, "--input-shape", shape, "--overwrite", "-v"]),
                ]
                if not args.measure:
                    runs[-1][1].append("--no-measure")
                results = {name: [] for name, _ in runs}
                for _ in range(args.repeat):
                    for name, cmd in runs:
                        # Every run starts with no dirty pages: none pays for
                        # the writeback of the one before it.
                        os.sync()
                        results[name].append(timed(cmd))
                        if os.path.exists(out):
                            os.remove(out)
                py_wall = statistics.median(w for w, _, _ in results["python"])
                durable_wall = statistics.median(w for w, _, _ in results["py+fsync"])
                for name, _ in runs:
                    walls = [w for w, _, _ in results[name]]
                    wall = statistics.median(walls)
                    rss = max(r for _, r, _ in results[name])
                    text = min(results[name], key=lambda t: abs(t[0] - wall))[2]  # the run nearest the median
                    stages = stage_times(text)
                    row = {"model": kind, "gb": round(gb, 3), "bytes": nbytes, "run": name, "wall_s": round(wall, 2),
                           "walls_s": [round(w, 2) for w in walls], "s_per_gb": round(wall / gb, 2),
                           "rss_over_bytes": round(rss / nbytes, 2), "vs_python": round(wall / py_wall, 2),
                           "vs_python_fsync": round(wall / durable_wall, 2),
                           "stages_s_per_gb": {k: round(v / gb, 2) for k, v in stages.items()}}
                    rows.append(row)
                    st = " ".join("%s=%.1f" % (k, stages[k] / gb) for k in STAGES if k in stages)
                    print("%-8s %5.2f %8.2e | %-8s %8.1f %7.1f %9.2f %8.2f %8.2f | %s" % (
                        kind, gb, nbytes, name, wall, wall / gb, rss / nbytes, wall / py_wall, wall / durable_wall, st),
                        flush=True)
                os.remove(model)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
