"""Two checkouts of edgegaze on the same frames, interleaved: process CPU and wall per frame of the
pipeline `edgegaze run` builds with no flags (or a set), decode excluded.

Each checkout runs in a worker process of its own (PYTHONPATH = that checkout), which decodes the
frames once and then runs blocks of them when told; blocks alternate A, B, A, B ..., so a change of
load on a shared machine hits both alike. Per checkout: the median over blocks of process CPU ms per
frame (the worker's own, all its threads) and wall ms per frame, and their ratio B / A.

    python scripts/ab_checkouts.py /work/main /work/wt/oneway [--video V] [--frames 100] [--rounds 8] [--models default]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKER = r"""
import json, sys, time
from pipeline.api import build_pipeline
from pipeline.runner import use_one_opencv_thread
from pipeline.sources import open_source

use_one_opencv_thread()
video, frames, models = sys.argv[1], int(sys.argv[2]), sys.argv[3]
held = list(open_source(video, max_frames=frames))
pipe = build_pipeline(models)
list(pipe.run(iter(held[:10])))  # warm-up: first-inference costs
print("ready", flush=True)
for line in sys.stdin:
    pipe.reset()
    cpu, wall = time.process_time(), time.perf_counter()
    n = sum(1 for _ in pipe.run(iter(held)))
    print(json.dumps({"cpu_ms": (time.process_time() - cpu) * 1e3 / n, "wall_ms": (time.perf_counter() - wall) * 1e3 / n}),
          flush=True)
"""


def worker(checkout: str, args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": checkout}
    proc = subprocess.Popen([sys.executable, "-c", WORKER, args.video, str(args.frames), args.models], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=checkout)
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"{checkout}: the worker did not start")
    return proc


def block(proc: subprocess.Popen) -> dict:
    proc.stdin.write("run\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--video", default="/work/shared/data/video/webcam_1280x720.mp4")
    p.add_argument("--frames", type=int, default=100)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--models", default="default")
    args = p.parse_args()
    procs = {name: worker(path, args) for name, path in (("A", args.a), ("B", args.b))}
    rows = {name: [] for name in procs}
    load = os.getloadavg()
    for r in range(args.rounds):
        for name in (("A", "B") if r % 2 == 0 else ("B", "A")):
            rows[name].append(block(procs[name]))
    for proc in procs.values():
        proc.stdin.close()
        proc.wait(timeout=60)
    out = {name: {k: statistics.median(x[k] for x in got) for k in ("cpu_ms", "wall_ms")} for name, got in rows.items()}
    out["B/A"] = {k: out["B"][k] / out["A"][k] for k in ("cpu_ms", "wall_ms")}
    out["per block"] = rows
    out.update(a=args.a, b=args.b, frames=args.frames, rounds=args.rounds, models=args.models,
               load_before=[round(x, 2) for x in load], load_after=[round(x, 2) for x in os.getloadavg()],
               when=time.strftime("%Y-%m-%d %H:%M"))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
