"""The optional parts of edgegaze, and the one line a command prints when its part is missing.

`pip install edgegaze` installs what running a pipeline needs (OpenVINO, NumPy, OpenCV and a few
small helpers): run, deploy, a bundle, models, convert. The tools are extras (pyproject.toml):
a command checks its extras before any work, so `report` does not measure for minutes and then
fail on the plotting library.
"""

from __future__ import annotations

import sys
from importlib.util import find_spec
from pathlib import Path

from pipeline.errors import EdgegazeError

# extra -> the modules (import names) it provides
PROVIDES = {
    "optimize": ("nncf", "matplotlib", "jinja2", "markdown_it"),
    "eval": ("scipy", "matplotlib", "jinja2", "markdown_it"),
    "report": ("matplotlib", "jinja2", "markdown_it"),
    "mouse": ("pyautogui", "OneEuroFilter", *(("Xlib",) if sys.platform.startswith("linux") else ())),
    "torch": ("torch",),
    "ray": ("ray",),
    "serve": ("pylsl",),  # `serve --lsl`
}

# command words -> the extras it needs (commands not named need none)
NEEDS = {
    "optimize quantize": ("optimize",),
    "optimize prune": ("optimize", "torch"),
    "optimize pipeline": ("ray", "report"),
    "batch": ("ray",),
    "report": ("report",),
    "eval": ("eval",),
    "mouse": ("mouse",),
}


def install_hint(extras) -> str:
    """The pip command that adds `extras`: to this source checkout where edgegaze runs from one."""
    names = ",".join(extras)
    checkout = (Path(__file__).resolve().parents[1] / "pyproject.toml").is_file()
    return f'pip install -e ".[{names}]"' if checkout else f'pip install "edgegaze[{names}]"'


def missing(extras) -> list[str]:
    """The extras among `extras` with a module that is not installed."""
    return [e for e in extras if any(find_spec(m) is None for m in PROVIDES[e])]


def check(command: str) -> None:
    """Fail in one line, before any work, when `command` ("optimize quantize", "run", ...) needs an
    extra that is not installed."""
    lacking = missing(NEEDS.get(command, ()))
    if lacking:
        lacks = [m for e in lacking for m in PROVIDES[e] if find_spec(m) is None]
        raise EdgegazeError(f"`edgegaze {command}` needs {', '.join(dict.fromkeys(lacks))}, which this install lacks; "
                            f"install it with: {install_hint(lacking)}")


def for_module(name: str | None) -> str | None:
    """The extra that provides the module `name` (e.g. 'nncf.torch'), or None."""
    top = (name or "").split(".")[0]
    return next((e for e, modules in PROVIDES.items() if top in modules), None)
