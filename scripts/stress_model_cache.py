"""N `edgegaze run` processes started at once on one model cache, round after round: on a cold cache
(fetched sources only: no IR, no compiled blob) or, with --damage, on a cache whose iris-landmark
FP32 bin is cut short. Prints how many runs failed and each distinct error (docs/reliability.md).

    python scripts/stress_model_cache.py --rounds 10 --processes 4
    python scripts/stress_model_cache.py --rounds 8 --processes 4 --damage
    python scripts/stress_model_cache.py --checkout /tmp/old-edgegaze   # the same against other code

The sources are copied from this checkout's model cache (models/cache), which must hold the
mediapipe set (`edgegaze models fetch`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VIDEO = ROOT.parent / "shared" / "data" / "video" / "webcam_640x480.mp4"
MODELS = ("face-detection-short-range", "face-landmark", "iris-landmark")


def cold_home(root: Path) -> Path:
    home = Path(tempfile.mkdtemp(prefix="home-", dir=root))
    for model in MODELS:
        shutil.copytree(ROOT / "models" / "cache" / model, home / "cache" / model)
    return home


def run_at_once(home: Path, code: Path, n: int, frames: int = 3) -> list[subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(code), "EDGEGAZE_HOME": str(home)}
    # the mediapipe set, whose sources cold_home copies (the default set's gaze network is not among them)
    cmd = [sys.executable, "-m", "pipeline", "run", "--input", str(VIDEO), "--max-frames", str(frames),
           "--models", "mediapipe"]
    procs = [subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    # communicate, not wait first: a child that fills its pipe would block for good
    outputs = [p.communicate() for p in procs]
    return [subprocess.CompletedProcess(cmd, p.returncode, *o) for p, o in zip(procs, outputs)]


def damage(home: Path, code: Path) -> None:
    """A warm cache whose iris-landmark FP32 bin is cut to 1000 bytes, without compiled blobs."""
    run_at_once(home, code, 1)
    shutil.rmtree(home / "ov_cache", ignore_errors=True)
    bin_path = home / "ir" / "iris-landmark" / "FP32" / "iris-landmark.bin"
    bin_path.write_bytes(bin_path.read_bytes()[:1000])


def why(p: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    last = lines[-1] if lines else "no message"
    return f"exit {p.returncode}: {last[:200]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--damage", action="store_true", help="start from a damaged IR instead of a cold cache")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the edgegaze code to run (default: this checkout)")
    args = ap.parse_args()
    failures, total = Counter(), 0
    with tempfile.TemporaryDirectory(prefix="edgegaze-stress-") as root:
        for _ in range(args.rounds):
            home = cold_home(Path(root))
            if args.damage:
                damage(home, args.checkout)
            for p in run_at_once(home, args.checkout, args.processes):
                total += 1
                if p.returncode != 0:
                    failures[why(p)] += 1
            shutil.rmtree(home)
    print(f"{'damaged IR' if args.damage else 'cold cache'}, {args.processes} processes x {args.rounds} rounds: "
          f"{sum(failures.values())} of {total} failed")
    for message, count in failures.most_common():
        print(f"  {count} x {message}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
