#!/usr/bin/python3
"""What `ptopt.optimize` in Python adds to the CLI's time for the same work
(issue 22's target: < 5%).

The same work: load resnet18 from a file, import, -O1, reference and
verification on 3 seeded 1x3x224x224 inputs, serialize and load back, write
the result. CLI: `ptopt IN OUT -O1 --input-shape 1,3,224,224`, timed as a
process (wall clock, LibTorch's start-up included). Python: a warm process
(torch and ptopt imported once, not timed) times
`torch.jit.save(ptopt.optimize(IN, "-O1", input_shapes=[...]), OUT)`.
Runs alternate (CLI, Python, CLI, ...) and the medians are compared.
Pin it for quieter numbers: taskset -c 1 env OMP_NUM_THREADS=1 ...

Usage: bench/python_overhead.py PTOPT_BINARY BUILD_PYTHON_DIR MODEL.pt [RUNS]
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

ptopt_bin, pydir, model = sys.argv[1:4]
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
sys.path.insert(0, pydir)
import torch  # noqa: E402
import ptopt  # noqa: E402

tmp = tempfile.mkdtemp()
cli_out, py_out = os.path.join(tmp, "cli.pt"), os.path.join(tmp, "py.pt")
cli, py, cli_internal = [], [], []
for i in range(runs + 1):  # the first round warms the file cache: not counted
    t = time.perf_counter()
    r = subprocess.run([ptopt_bin, model, cli_out, "-O1", "--input-shape", "1,3,224,224", "--overwrite", "-q"],
                       capture_output=True, text=True, check=True)
    t_cli = time.perf_counter() - t
    t = time.perf_counter()
    torch.jit.save(ptopt.optimize(model, "-O1", input_shapes=["1,3,224,224"]), py_out)
    t_py = time.perf_counter() - t
    if i:
        cli.append(t_cli)
        py.append(t_py)
        cli_internal.append(float(r.stdout.strip().rsplit("(", 1)[1].rstrip(" s)")))
mc, mp, mi = statistics.median(cli), statistics.median(py), statistics.median(cli_internal)
print(f"runs {runs}, threads {torch.get_num_threads()}")
print(f"CLI process      median {mc:.3f} s  ({', '.join(f'{x:.3f}' for x in cli)})")
print(f"CLI from load on median {mi:.3f} s  (its own 'PASSED ... (X s)')")
print(f"Python optimize  median {mp:.3f} s  ({', '.join(f'{x:.3f}' for x in py)})")
print(f"Python / CLI process: {mp / mc:.3f}x; Python / CLI from load on: {mp / mi:.3f}x")
