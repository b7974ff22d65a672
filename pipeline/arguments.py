"""Command-line argument types and the options several commands share, below both the CLI
(pipeline/cli/) and the gaze mouse's options (control/options.py), so neither imports the
other. No heavy imports: the parser is built before any model is loaded."""

from __future__ import annotations

import argparse
import math

from pipeline.bounds import Bounds

STAGE_FLAGS = ("face", "landmarks", "head-pose", "gaze", "eye-state")


def int_at_least(low: int):
    """argparse type: a whole number >= low."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        return value
    return parse


def number(above: float | None = None, low: float | None = None, high: float | None = None):
    """argparse type: a finite number above `above`, in [low, high] (each bound optional)."""
    bounds = Bounds(above=above, low=low, high=high)

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
        if not bounds.allows(value):
            raise argparse.ArgumentTypeError(f"{text} must be {bounds.span()}")
        return value
    return parse


def add_stage_options(p: argparse.ArgumentParser) -> None:
    """--face/--landmarks/--head-pose/--gaze/--eye-state: swap one stage's implementation."""
    for kind in STAGE_FLAGS:
        p.add_argument(f"--{kind}", help=f"{kind} implementation: a zoo model id (or 'none'); mixes sets; "
                       "ID@PRECISION runs that stage at its own precision (e.g. a pruned CH20)")


def stage_overrides(args) -> dict:
    """{kind: id} of the stage options given (Pipeline.from_set keywords)."""
    kinds = (k.replace("-", "_") for k in STAGE_FLAGS)
    return {k: getattr(args, k) for k in kinds if getattr(args, k, None)}


def add_param_option(p: argparse.ArgumentParser) -> None:
    """--param STAGE.KEY=VALUE (repeatable), checked when the pipeline is built (pipeline.stages.params)."""
    p.add_argument("--param", dest="params", action="append", metavar="STAGE.KEY=VALUE",
                   help="a stage parameter, STAGE a zoo id or mesh, e.g. face-detection-short-range.score_threshold=0.7 "
                        "(repeatable; `edgegaze models show ID` lists them)")


class BundlePath(str):
    """A path given with --bundle: where --profile would take a plain profile too, it must name a
    bundle (pipeline.bundle refuses anything else at once, in one line)."""


def add_profile_options(p: argparse.ArgumentParser, what: str, required: bool = False) -> None:
    """--profile FILE or --bundle DIR_OR_ARCHIVE (a profile loads from either: pipeline.profile.load)."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--profile", help=f"deployment profile TOML (edgegaze optimize pipeline): {what}")
    g.add_argument("--bundle", dest="profile", metavar="DIR_OR_ARCHIVE", type=BundlePath,
                   help="a bundle from `edgegaze deploy` (folder or .tar.gz): its profile and models, checked first")

