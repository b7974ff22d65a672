"""`edgegaze eval gaze-session` options, each declared once as a Setting (pipeline/settings.py):
SessionOptions, with the learning-from-clicks run's OnlineOptions nested (online.evaluate's
keywords). Light to import: the CLI builds its parser from them before any model or plot library
loads."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.control import calibration as cal
from pipeline.settings import Options, section, setting


@dataclass(frozen=True)
class OnlineOptions(Options):
    """Learning from clicks, replayed on the session (evaluate/online.py); off without a layout."""

    layout: str | None = setting(None, "also learn from clicks: start on the targets nearest the mouse's --targets "
                                 "LAYOUT (5: the centre and corners), then take the others in recorded order as clicks",
                                 parser=cal.checked_layout, flag="--online", metavar="LAYOUT")
    wrong: float = setting(0.0, "with --online: also this share of clicks landing on another target (seeded draws)",
                           low=0, high=0.9, flag="--wrong-clicks", metavar="FRACTION")
    seed: int = setting(0, "with --wrong-clicks: the draws' seed")


@dataclass(frozen=True)
class SessionOptions(Options):
    video: str | None = setting(None, "video file, overriding the session's")
    all_frames: bool = setting(False, "use every frame with a face, not only steady ones")
    calibration: cal.CalibrationMethod = setting(cal.CalibrationMethod.AUTO, "auto: each calibration chooses its model "
                                                 "from its targets; or one model")
    online: OnlineOptions = section(OnlineOptions)
