"""Deploying to the edge: what `pip install edgegaze` weighs, how fast a bundle starts, and whether it
gives what the profile gives.

1. Install size: this checkout's wheel into two fresh venvs, `pip install edgegaze` (runtime only) and
   `pip install "edgegaze[optimize,eval,report,mouse]"` ([all] but torch and Ray, which the target sets
   aside); bytes of each site-packages, with and without pip and setuptools (the venv's own installer),
   and the largest distributions. Needs PyPI or pip's cache; --no-sizes skips it. The start-up runs
   then use the runtime-only venv's `edgegaze` (else this environment's).
2. Start to first result: `edgegaze run --bundle B --input VIDEO --max-frames 1 --json /dev/stdout`,
   from the exec to the first JSON line (wall), with the process's CPU time up to that line (user +
   sys, /proc, 10 ms ticks). Cases, each --repeats times and interleaved (one of each in turn, so a
   change of load hits all alike): the bundle folder with its compiled blobs, and without them, each
   with an empty EDGEGAZE_HOME (nothing compiled before: a box's first start); without blobs once
   edgegaze's compiled-model cache under EDGEGAZE_HOME is warm (every later start); the .tar.gz on a first
   start (it is unpacked); and `run --profile` on the workstation (zoo and model folder, warm cache).
3. Identical outputs: `run --bundle` (blobs, no blobs) against `run --profile` over --frames frames,
   frame for frame, timing fields aside.

    PYTHONPATH=$PWD python benchmarks/bench_deploy.py [--profile P] [--repeats 7] [--frames 100] [--no-sizes]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, markdown_table, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from conftest import jsonl_frames  # noqa: E402  (one reader of JSON Lines without timing fields)

VIDEO = ROOT.parent / "shared" / "data" / "video" / "webcam_640x480.mp4"
FULL = "optimize,eval,report,mouse"
INSTALLER = ("pip", "setuptools", "_distutils_hack", "pkg_resources")
TICK = os.sysconf("SC_CLK_TCK")


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def user_env(**extra) -> dict:
    """This environment without the checkout on the path (its edgegaze.egg-info would read as
    installed) nor edgegaze's own variables."""
    drop = ("PYTHONPATH", "EDGEGAZE_HOME", "EDGEGAZE_ZOO")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def install(wheel: Path, where: Path, extras: str = "") -> Path:
    """A fresh venv with the wheel (and `extras`) installed by pip; its site-packages."""
    venv.EnvBuilder(with_pip=True).create(where)
    spec = f"{wheel}[{extras}]" if extras else str(wheel)
    subprocess.run([where / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", spec],
                   check=True, timeout=1800, env=user_env())
    return next((where / "lib").glob("python*/site-packages"))


def sizes(site: Path) -> dict:
    tops = {p.name: folder_bytes(p) if p.is_dir() else p.stat().st_size for p in site.iterdir()}
    installer = sum(v for k, v in tops.items() if k.split("-")[0].split(".")[0] in INSTALLER)
    total = sum(tops.values())
    largest = sorted(((k, v) for k, v in tops.items() if not k.endswith(".dist-info")), key=lambda kv: -kv[1])[:8]
    return {"mb": round(total / 1e6, 1), "mb_without_installer": round((total - installer) / 1e6, 1),
            "largest_mb": {k: round(v / 1e6, 1) for k, v in largest}}


def install_sizes(wheel: Path, work: Path) -> dict:
    runtime, full = install(wheel, work / "runtime"), install(wheel, work / "full", FULL)
    out = {"runtime": sizes(runtime), "full": {**sizes(full), "extras": FULL}}
    for key in ("mb", "mb_without_installer"):
        out[f"ratio_{key}"] = round(out["runtime"][key] / out["full"][key], 3)
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def first_result(cmd: list, env: dict, cwd: Path) -> dict:
    """Seconds from the exec to the first JSON line on stdout, and the CPU seconds spent by then."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(p.pid) if line.startswith("{") else None
    _, err = p.communicate(timeout=120)
    if p.returncode != 0 or cpu is None:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed: {err.strip()[-500:]}")
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def startup(edgegaze: list, env: dict, profile: Path, bundles: dict, work: Path, repeats: int) -> dict:
    """Each case `repeats` times, interleaved; a fresh EDGEGAZE_HOME where the case says so."""
    run = ["run", "--input", str(VIDEO), "--max-frames", "1", "--json", "/dev/stdout"]
    warm = work / "warm-home"
    cases = {
        "bundle + blobs, empty home": (["--bundle", bundles["blobs"]], None),
        "bundle, no blobs, empty home": (["--bundle", bundles["plain"]], None),
        "bundle, no blobs, compiled-model cache warm": (["--bundle", bundles["plain"]], warm),
        ".tar.gz + blobs, empty home (unpacked)": (["--bundle", bundles["archive"]], None),
        "run --profile (zoo, model folder, warm)": (["--profile", profile], "checkout"),
    }
    first_result([*edgegaze, *run, "--bundle", bundles["plain"]], {**env, "EDGEGAZE_HOME": str(warm)}, work)
    rows = {name: [] for name in cases}
    for rep in range(repeats):
        for i, (name, (args, home)) in enumerate(cases.items()):
            fresh = work / f"home-{rep}-{i}"
            # run --profile: the checkout's code, zoo and models
            case_env = {**env, "PYTHONPATH": str(ROOT)} if home == "checkout" else {**env, "EDGEGAZE_HOME": str(home or fresh)}
            rows[name].append(first_result([*edgegaze, *run, *map(str, args)], case_env, work))
            shutil.rmtree(fresh, ignore_errors=True)
        print(f"round {rep + 1}/{repeats}: " + ", ".join(f"{r[-1]['wall_s']:.2f}" for r in rows.values()), flush=True)
    return rows


def percentile(values: list, q: float) -> float:
    import numpy as np

    return round(float(np.percentile(values, q)), 3)


def identical(edgegaze: list, env: dict, profile: Path, bundles: dict, work: Path, frames: int) -> dict:
    """run --bundle (each form) against run --profile over `frames` frames: equal frame for frame?"""
    run = ["run", "--input", str(VIDEO), "--max-frames", str(frames)]
    subprocess.run([sys.executable, "-m", "pipeline", *run, "--profile", str(profile), "--json", str(work / "ref.jsonl")],
                   env=user_env(PYTHONPATH=str(ROOT)), check=True, capture_output=True)
    ref, out = jsonl_frames(work / "ref.jsonl"), {}
    for name in ("blobs", "plain"):
        home = work / f"same-{name}"
        subprocess.run([*edgegaze, *run, "--bundle", str(bundles[name]), "--json", str(work / f"{name}.jsonl")],
                       env={**env, "EDGEGAZE_HOME": str(home)}, check=True, capture_output=True)
        out[name] = {"frames": len(ref), "identical": jsonl_frames(work / f"{name}.jsonl") == ref}
    return out


def make_bundles(profile: Path, work: Path) -> dict:
    from pipeline.deploy import deploy

    quiet = lambda *_: None  # noqa: E731
    bundles = {"blobs": deploy(profile, work / "edge", log=quiet),
               "plain": deploy(profile, work / "edge-plain", blobs=False, log=quiet),
               "archive": deploy(profile, work / "edge.tar.gz", log=quiet)}
    return {**bundles, "mb": {k: round((folder_bytes(v) if v.is_dir() else v.stat().st_size) / 1e6, 1)
                              for k, v in bundles.items()}}


def reference_profile(path: Path) -> Path:
    """The search's reference candidate (the default set at FP32), as `optimize pipeline` writes it."""
    from pipeline import profile as profiles
    from pipeline.optimize import search

    return profiles.write(path, search.reference().profile({}, {}, {"note": "bench_deploy reference"}))


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    names = list(result["startup"])
    wall = [result["startup"][n]["median_wall_s"] for n in names]
    cpu = [result["startup"][n]["median_cpu_s"] for n in names]
    y = range(len(names))
    axes[0].barh([i + 0.2 for i in y], wall, 0.4, label="wall (median)")
    axes[0].barh([i - 0.2 for i in y], cpu, 0.4, label="CPU (median)")
    for target, label in ((1.0, "target with blobs"), (2.0, "target without")):
        axes[0].axvline(target, ls="--", c="gray")
        axes[0].text(target, len(names) - 0.4, label, fontsize=8, ha="right")
    axes[0].set_yticks(list(y), names, fontsize=8)
    axes[0].invert_yaxis()
    axes[0].set_xlabel("s from exec to the first JSON line")
    axes[0].legend(fontsize=8)
    sizes_ = result.get("install")
    if sizes_:
        axes[1].bar(["runtime", "full"], [sizes_["runtime"]["mb"], sizes_["full"]["mb"]])
        axes[1].set_ylabel("site-packages MB")
        axes[1].set_title(f"runtime / full = {sizes_['ratio_mb']:.0%}", fontsize=9)
    else:
        axes[1].axis("off")
    fig.suptitle(f"edgegaze bundle start, {result['machine']['cpu']} ({result['machine']['cores']} cores)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(result: dict) -> str:
    rows = [{"case": n, **{k: v for k, v in s.items() if k != "runs"}} for n, s in result["startup"].items()]
    lines = [f"# Deploy: install size and bundle start ({result['machine']['cpu']}, "
             f"{result['machine']['cores']} cores, load {result['load_before']} before)", "",
             f"Bundles: {result['bundles_mb']} MB; profile {result['profile']}.", "",
             "## From `edgegaze run --bundle` to the first result (640x480 video)", "",
             markdown_table(rows, ["case", "median_wall_s", "p90_wall_s", "median_cpu_s", "p90_cpu_s"]), ""]
    lines += ["## Outputs against `run --profile`", "",
              *[f"- {k}: {v['frames']} frames, identical: {v['identical']}" for k, v in result["identical"].items()], ""]
    if result.get("install"):
        s = result["install"]
        lines += ["## Install size (site-packages of a fresh venv)", "",
                  markdown_table([{"install": "edgegaze", **{k: v for k, v in s["runtime"].items() if k != "largest_mb"}},
                                  {"install": f"edgegaze[{FULL}]", **{k: v for k, v in s["full"].items()
                                                                       if k in ("mb", "mb_without_installer")}}],
                                 ["install", "mb", "mb_without_installer"]), "",
                  f"runtime / full: {s['ratio_mb']:.1%} ({s['ratio_mb_without_installer']:.1%} without pip and setuptools)", "",
                  f"Largest in the runtime install (MB): {s['runtime']['largest_mb']}", "",
                  f"Largest in the full install (MB): {s['full']['largest_mb']}", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", help="profile to deploy (default: the search's reference, the default set at FP32)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--frames", type=int, default=100, help="frames compared against run --profile")
    ap.add_argument("--no-sizes", action="store_true", help="skip the two fresh installs (they need PyPI or pip's cache)")
    ap.add_argument("--out", default="results/deploy")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-deploy-") as tmp:
        work = Path(tmp)
        profile = Path(a.profile) if a.profile else reference_profile(work / "profile.toml")
        result = {"machine": machine(), "load_before": round(os.getloadavg()[0], 2), "profile": str(a.profile or "reference")}
        edgegaze, env = [sys.executable, "-m", "pipeline"], user_env(PYTHONPATH=str(ROOT))
        if not a.no_sizes:
            subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(work / "dist")], check=True)
            result["install"] = install_sizes(next((work / "dist").glob("edgegaze-*.whl")), work / "venvs")
            edgegaze, env = [str(work / "venvs" / "runtime" / "bin" / "edgegaze")], user_env()  # the runtime-only install
        result["edgegaze"] = " ".join(edgegaze)
        bundles = make_bundles(profile, work)
        result["bundles_mb"] = bundles.pop("mb")
        runs = startup(edgegaze, env, profile, bundles, work, a.repeats)
        result["startup"] = {n: {"median_wall_s": percentile([r["wall_s"] for r in rs], 50),
                                 "p90_wall_s": percentile([r["wall_s"] for r in rs], 90),
                                 "median_cpu_s": percentile([r["cpu_s"] for r in rs], 50),
                                 "p90_cpu_s": percentile([r["cpu_s"] for r in rs], 90), "runs": rs}
                             for n, rs in runs.items()}
        result["identical"] = identical(edgegaze, env, profile, bundles, work, a.frames)
        result["load_after"] = round(os.getloadavg()[0], 2)
    out = Path(a.out)
    write_results(out, "bench_deploy", result, markdown(result))
    plot(result, out / "bench_deploy.png")
    print(markdown(result))


if __name__ == "__main__":
    main()
