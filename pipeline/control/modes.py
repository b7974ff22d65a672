"""The pointer modes, declared once: each name (Mode), what it is, and how it is built from its
module (MODES).

`edgegaze mouse --mode`, the pointing test, bench_pointing and the docs take the list from here;
a new technique is one module (the pointer.Technique shape) and one entry below. Fixation hold and
zoom-to-click wrap whichever mode runs (`PointerOptions.fixation_hold`, `.zoom`); their options and
each technique's are declared as settings in their own modules and nested here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Callable

from pipeline.control.fixation import FixationHold, FixationOptions
from pipeline.control.gaze import GazeOptions, GazePointer
from pipeline.control.gaze_head import GazeHeadOptions, GazeHeadPointer, hold_radius
from pipeline.control.head import HeadPointer
from pipeline.control.mapping import MappingConfig, Screen
from pipeline.control.pointer import Need
from pipeline.control.relative import RelativePointer
from pipeline.control.zoom import ZoomOptions, ZoomToClick
from pipeline.settings import Options, section, setting


class Mode(StrEnum):
    """The pointer modes (MODES below says what each is)."""

    HEAD = "head"
    GAZE = "gaze"
    RELATIVE = "relative"
    GAZE_HEAD = "gaze+head"


POINTER = "pointer helpers (gaze modes)"


@dataclass
class PointerOptions(Options):
    """The helpers that wrap a mode, and each technique's own options."""

    fixation_hold: bool = setting(False, "gaze mode: the pointer holds still while you fixate (a dwell clicks the "
                                  "held point)", group=POINTER)
    zoom: bool = setting(False, "zoom-to-click: a dwell or blink opens a magnifier around the pointer, the second "
                         "one clicks the point picked in it", group=POINTER)
    gaze: GazeOptions = section(GazeOptions, POINTER)
    gaze_head: GazeHeadOptions = section(GazeHeadOptions, POINTER)
    fixation: FixationOptions = section(FixationOptions, POINTER)
    zoom_view: ZoomOptions = section(ZoomOptions, POINTER)


@dataclass
class Context:
    """What a technique is built from besides its options."""

    screen: Screen
    px_per_deg: float  # screen px per degree of visual angle (mapping.px_per_degree)
    model: object = None  # the calibration's GazeModel (gaze modes)
    calibration_error_px: float | None = None  # its leave-one-target-out mean error
    mapping: MappingConfig = field(default_factory=MappingConfig)  # sensitivity, head range, mirror ...


def _gaze(o: PointerOptions, c: Context) -> GazePointer:
    return GazePointer(c.screen, c.model, c.px_per_deg, o.gaze, c.mapping.sensitivity)


def _gaze_head(o: PointerOptions, c: Context) -> GazeHeadPointer:
    radius = hold_radius(o.gaze_head, c.calibration_error_px, c.px_per_deg)
    return GazeHeadPointer(_gaze(o, c), HeadPointer(c.screen, c.mapping), radius, o.gaze_head)


@dataclass(frozen=True)
class Declared:
    help: str
    needs: frozenset
    build: Callable[[PointerOptions, Context], object]


MODES = {
    Mode.HEAD: Declared("head pointer: head turns off a neutral pose place the pointer", HeadPointer.needs,
                        lambda o, c: HeadPointer(c.screen, c.mapping)),
    Mode.GAZE: Declared("the calibrated gaze point", GazePointer.needs, _gaze),
    Mode.RELATIVE: Declared("the pointer moves along the gaze direction", RelativePointer.needs,
                            lambda o, c: RelativePointer(c.screen, c.mapping)),
    Mode.GAZE_HEAD: Declared("gaze jumps the pointer near the target, head turns put it on the target",
                             GazeHeadPointer.needs, _gaze_head),
}


def gaze_modes() -> list[Mode]:
    """The modes that read a calibration."""
    return [mode for mode, m in MODES.items() if Need.CALIBRATION in m.needs]


def check(mode: Mode, o: PointerOptions) -> str | None:
    """What cannot work in this combination (None: it can), in words naming the flags."""
    if mode not in MODES:
        return f"--mode must be one of {', '.join(MODES)}, not {mode!r}"
    if o.fixation_hold and mode != Mode.GAZE:
        return f"--fixation-hold is for --mode gaze (gaze+head holds the pointer by its circle), not {mode}"
    return None


def build(mode: Mode, o: PointerOptions, c: Context, view=None):
    """The technique of `mode`, wrapped in fixation hold and zoom-to-click when `o` asks;
    `view`: the magnifier zoom-to-click shows (None: places and maps without showing)."""
    problem = check(mode, o)
    if problem:
        raise ValueError(problem)
    technique = MODES[Mode(mode)].build(o, c)
    if o.fixation_hold:
        technique = FixationHold(technique, c.px_per_deg, o.fixation)
    if o.zoom:
        technique = ZoomToClick(technique, c.screen, o.zoom_view, view)
    return technique
