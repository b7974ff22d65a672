"""The pointer modes, declared once: each name, what it is, and how it is built from its module.

`edgegaze mouse --mode`, the pointing test, bench_pointing and the docs take the list from here;
a new technique is one module (the pointer.Technique shape) and one entry below. Fixation hold and
zoom-to-click wrap whichever mode runs (`PointerOptions.fixation_hold`, `.zoom`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pipeline.control.fixation import FixationHold, FixationOptions
from pipeline.control.gaze import GazeOptions, GazePointer
from pipeline.control.gaze_head import GazeHeadOptions, GazeHeadPointer, hold_radius
from pipeline.control.head import HeadPointer
from pipeline.control.mapping import MappingConfig, Screen
from pipeline.control.pointer import Need
from pipeline.control.relative import RelativePointer
from pipeline.control.zoom import ZoomOptions, ZoomToClick


@dataclass
class PointerOptions:
    """The mode and its helpers' options (each technique's own dataclass)."""

    mode: str = "head"
    fixation_hold: bool = False  # gaze modes: the pointer holds still while the user fixates
    zoom: bool = False  # click triggers open a magnifier first, the second selection clicks through it
    mapping: MappingConfig = field(default_factory=MappingConfig)
    gaze: GazeOptions = field(default_factory=GazeOptions)
    gaze_head: GazeHeadOptions = field(default_factory=GazeHeadOptions)
    fixation: FixationOptions = field(default_factory=FixationOptions)
    zoom_options: ZoomOptions = field(default_factory=ZoomOptions)


@dataclass
class Context:
    """What a technique is built from besides its options."""

    screen: Screen
    px_per_deg: float  # screen px per degree of visual angle (mapping.px_per_degree)
    model: object = None  # the calibration's GazeModel (gaze modes)
    calibration_error_px: float | None = None  # its leave-one-target-out mean error


def _gaze(o: PointerOptions, c: Context) -> GazePointer:
    return GazePointer(c.screen, c.model, c.px_per_deg, o.gaze, o.mapping.sensitivity)


def _gaze_head(o: PointerOptions, c: Context) -> GazeHeadPointer:
    radius = hold_radius(o.gaze_head, c.calibration_error_px, c.px_per_deg)
    return GazeHeadPointer(_gaze(o, c), HeadPointer(c.screen, o.mapping), radius, o.gaze_head)


@dataclass(frozen=True)
class Mode:
    help: str
    needs: frozenset
    build: Callable[[PointerOptions, Context], object]


MODES = {
    "head": Mode("head pointer: head turns off a neutral pose place the pointer", HeadPointer.needs,
                 lambda o, c: HeadPointer(c.screen, o.mapping)),
    "gaze": Mode("the calibrated gaze point", GazePointer.needs, _gaze),
    "relative": Mode("the pointer moves along the gaze direction", RelativePointer.needs,
                     lambda o, c: RelativePointer(c.screen, o.mapping)),
    "gaze+head": Mode("gaze jumps the pointer near the target, head turns put it on the target",
                      GazeHeadPointer.needs, _gaze_head),
}


def gaze_modes() -> list[str]:
    """The modes that read a calibration."""
    return [name for name, m in MODES.items() if Need.CALIBRATION in m.needs]


def check(o: PointerOptions) -> None:
    """The options' combinations that cannot work, each as a ValueError naming the option."""
    if o.mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {o.mode!r}")
    if o.fixation_hold and o.mode != "gaze":
        raise ValueError(f"fixation hold is for the gaze mode (gaze+head holds by its circle), not {o.mode!r}")


def build(o: PointerOptions, c: Context, view=None):
    """The technique for `o.mode`, wrapped in fixation hold and zoom-to-click when asked;
    `view`: the magnifier zoom-to-click shows (None: places and maps without showing)."""
    check(o)
    technique = MODES[o.mode].build(o, c)
    if o.fixation_hold:
        technique = FixationHold(technique, c.px_per_deg, o.fixation)
    if o.zoom:
        technique = ZoomToClick(technique, c.screen, o.zoom_options, view)
    return technique
