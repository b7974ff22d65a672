"""Shared fixtures: real data from ../shared/data and the real zoo, fetched and converted once.

Under CI=true missing shared data, or a missing optional part that CI installs (PyTorch, Ray, a
virtual X server, Chromium), is an error, never a silent skip. Elsewhere such a test skips with the command
that enables it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EDGEGAZE_SHARED", ROOT.parent / "shared" / "data"))
OMZ_MIRROR = SHARED / "models" / "omz"
# every mirrored source: OMZ files in the storage's intel/ layout, then 3DDFA_V2's at 3ddfa_v2/
MIRRORS = os.pathsep.join(map(str, (OMZ_MIRROR, SHARED / "models")))
CI = os.environ.get("CI", "").lower() == "true"
# what `pip install -e ".[dev]"` leaves out, and the command that adds it
ENABLE = {
    # a plain `pip install torch` pulls a CUDA build (GBs): the CPU build first, then the extra
    "torch": 'pip install torch==2.13.0 && pip install -e ".[torch]"',
    "ray": 'pip install -e ".[ray]"',  # in [dev]; named for installs without it
    "Xvfb": "sudo apt-get install xvfb xdotool",
    "xdotool": "sudo apt-get install xvfb xdotool",
    "chromium": "sudo apt-get install chromium",
    "playwright": 'pip install -e ".[dev]"',
    # the real Open Gaze API and LSL clients tests/test_serve.py runs (PyGaze needs lxml and pygame)
    **{m: 'pip install -e ".[dev]"' for m in ("pygaze", "lxml", "pygame", "pylsl")},
}


def unavailable(msg: str):
    """What a test needs is not here: a skip locally, a failure under CI=true (CI installs it all)."""
    if CI:  # CI installs every optional part: a missing one would hide its tests
        pytest.fail(msg)
    pytest.skip(msg)


def started_in_background() -> None:
    """A subprocess's preexec_fn: SIGINT ignored at start, as a command started in the background of
    a script (nohup, '&' in a non-interactive shell) inherits it; Python then installs no
    KeyboardInterrupt handler, and a Ctrl-C (SIGINT) must stop the command all the same."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def shared_path(rel: str) -> Path:
    """Path of a file under ../shared/data; skip locally (fail under CI) when it is absent."""
    path = SHARED / rel
    if not path.exists():
        unavailable(f"shared data missing: {path}")
    return path


def need(module: str):
    """An optional module (torch, ray), imported; skip with the command that installs it (fail under CI)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        unavailable(f"{module} is not installed: {ENABLE[module]}")


def need_tool(tool: str) -> None:
    """A program on PATH (Xvfb, xdotool); skip with the command that installs it (fail under CI)."""
    if shutil.which(tool) is None:
        unavailable(f"{tool} is not installed: {ENABLE[tool]}")


@contextlib.contextmanager
def private_display(width: int, height: int):
    """A private Xvfb on a free display (it picks the number: -displayfd), DISPLAY pointing at it
    while the block runs; skip (fail under CI) without Xvfb."""
    need_tool("Xvfb")
    r, w = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", f"{width}x{height}x24", "-nolisten", "tcp"],
                            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:  # Xvfb writes the display number it picked once it accepts clients
        number = f.readline().strip()
    assert number, "Xvfb did not start"
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = f":{number}"
    try:
        yield os.environ["DISPLAY"]
    finally:
        if old is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = old
        proc.terminate()
        proc.wait(timeout=10)


def jsonl_frames(path) -> list[dict]:
    """A JSON Lines output without its timing fields (they differ run to run)."""
    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "ms"}
        return [strip(x) for x in o] if isinstance(o, list) else o
    return [strip(json.loads(line)) for line in open(path)]


# A profile as `optimize pipeline` writes one, mixing sets and precisions, with a model-free stage
# (the mesh head pose) and every stage kind.
MIXED_PROFILE = """version = 1
name = "mixed"

[stages]
face = "face-detection-short-range@FP16"
landmarks = "face-landmark@FP32"
head_pose = "mesh"
gaze = "gaze-estimation-adas-0002@FP16"
eye_state = "open-closed-eye-0001@FP32"

[runtime]
tracking = true
redetect_every = 15
"""


def mixed_profile(path: Path) -> Path:
    path.write_text(MIXED_PROFILE)
    return path


def sample_rows(head, network=None, iris=None, *extra):
    """Calibration sample rows (regression.FEATURES order, then `extra` columns such as the openness)
    from (n, 2) gaze angles of each signal given (NaN for a signal not given) and (n, 2) head angles."""
    import numpy as np

    head = np.asarray(head, np.float64)
    nan = np.full((len(head), 2), np.nan)
    return np.column_stack([nan if network is None else network, nan if iris is None else iris, head, *extra])


def read_frames(rel: str, indices) -> list:
    """Decode the given frame indices of a shared video (BGR)."""
    from pipeline.sources import read_frames as read_at

    return [f for _, f in read_at(shared_path(rel), indices)]


@pytest.fixture(scope="session")
def zoo_ready():
    """Every zoo model fetched (mediapipe from its wheel, omz and 3ddfa from the shared mirror) and
    converted to all its precisions in the default home. Idempotent, so a warm checkout is fast."""
    from pipeline import convert, zoo

    shared_path("models/omz")
    shared_path("models/3ddfa_v2")
    for spec in zoo.select("all"):
        zoo.fetch(spec, mirror=MIRRORS, log=lambda *_: None)
        for precision in spec.precisions:
            convert.convert(spec, precision, log=lambda *_: None)
    return True


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium from the distribution's package, driven by Playwright (never a browser it
    downloads): one for the session, each page in a new tab. Playwright starts it with a fresh
    profile folder of its own."""
    from browser import CHROMIUM_ARGS, chromium

    need("playwright")
    executable = chromium()
    if executable is None:
        unavailable(f"chromium is not installed: {ENABLE['chromium']}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def ray_session(zoo_ready):
    """One local Ray for the module (starting one takes 5-10 s)."""
    need("ray")
    import ray

    from pipeline import cluster

    cluster.init(num_cpus=2)
    yield ray
    ray.shutdown()


def reference_profile(path):
    """A profile of the search's reference candidate (the default set at FP32) written to `path`."""
    from pipeline import profile as profiles
    from pipeline.optimize import search

    return profiles.write(path, search.reference().profile({"cpu_ms_per_frame": 1.0}, {}, {"videos": []}))


def clip(src: Path, dest: Path, frames: int) -> Path:
    """The first frames of a shared video, re-encoded (a short input of the same kind)."""
    import cv2

    cap = cv2.VideoCapture(str(src))
    ok, image = cap.read()
    out = cv2.VideoWriter(str(dest), cv2.VideoWriter_fourcc(*"mp4v"), 30, image.shape[1::-1])
    for _ in range(frames):
        out.write(image)
        ok, image = cap.read()
    out.release()
    return dest


def synthetic_calibration(path) -> Path:
    """A calibration file for plumbing, for a 1920x1080 screen: a gaze model fitted to synthetic
    samples (head, then the network's angles)."""
    import numpy as np

    from pipeline.control.calibration import Calibration, GazeModel, ScreenGeometry

    rng = np.random.default_rng(0)
    x = sample_rows(rng.normal(size=(50, 2)), rng.normal(size=(50, 2)))
    return Calibration(ScreenGeometry(1920, 1080, 530, 300), GazeModel().fit(x, x[:, :2] * 100 + 500),
                       "someone").save(path)
