"""`edgegaze serve --lsl`: Lab Streaming Layer outlets (pylsl, whose wheel carries liblsl).

Two streams, described as the XDF meta-data conventions for gaze ask (each channel's label, eye,
type and unit; https://github.com/sccn/xdf/wiki/Gaze-Meta-Data):
- `<name>` (type Gaze), one sample per frame at the camera's rate: the point of gaze as fractions
  of the screen and in screen pixels (NaN when invalid), its validity, the head's yaw, pitch and
  roll (degrees, NaN without a face) and the sample counter (the REC records' CNT);
- `<name>-markers` (type Markers, irregular): each USER_DATA value a client sets.
A gaze sample's timestamp is its frame's capture time on LSL's clock, so a recorder lines gaze up
with EEG and the rest by the moment the camera saw the eyes, not when the sample was sent.
"""

from __future__ import annotations

import math
import time

from pipeline import __version__

# label, eye, type, unit
CHANNELS = (
    ("screen_x", "both", "ScreenX", "normalized"),
    ("screen_y", "both", "ScreenY", "normalized"),
    ("screen_x_px", "both", "ScreenX", "pixels"),
    ("screen_y_px", "both", "ScreenY", "pixels"),
    ("valid", "both", "Confidence", "normalized"),
    ("head_yaw", "", "HeadYaw", "degrees"),
    ("head_pitch", "", "HeadPitch", "degrees"),
    ("head_roll", "", "HeadRoll", "degrees"),
    ("counter", "", "FrameNumber", "count"),
)
SCREEN = "screen: x to the right, y down, 0,0 the top left corner (normalized: 1,1 the bottom right)"
HEAD = "head pose: yaw > 0 turned to the image's right, pitch > 0 head down, roll > 0 clockwise (docs/run.md)"


class LslOutlets:
    """The gaze and marker outlets; push() and marker() never wait for a recorder."""

    def __init__(self, name: str, source_id: str, rate: float):
        import pylsl

        self._pylsl = pylsl
        info = pylsl.StreamInfo(name, "Gaze", len(CHANNELS), rate, pylsl.cf_double64, source_id)
        _describe(info)
        self.gaze = pylsl.StreamOutlet(info)
        markers = pylsl.StreamInfo(f"{name}-markers", "Markers", 1, pylsl.IRREGULAR_RATE, pylsl.cf_string,
                                   f"{source_id}-markers")
        self.markers = pylsl.StreamOutlet(markers)
        # LSL's clock and time.perf_counter both tick the system's monotonic clock; the offset
        # covers a build where they do not share a zero
        self.offset = pylsl.local_clock() - time.perf_counter()

    def push(self, sample, screen: tuple[int, int]) -> None:
        p, head, nan = sample.best, sample.head, math.nan
        x, y = (p.x, p.y) if p.valid else (nan, nan)
        angles = (head.yaw, head.pitch, head.roll) if head is not None else (nan, nan, nan)
        values = [x, y, x * screen[0], y * screen[1], float(p.valid), *angles, float(sample.counter)]
        self.gaze.push_sample(values, sample.tick / 1e9 + self.offset)

    def marker(self, value: str) -> None:
        self.markers.push_sample([value], self._pylsl.local_clock())


def _describe(info) -> None:
    desc = info.desc()
    acquisition = desc.append_child("acquisition")
    for key, value in (("manufacturer", "edgegaze"), ("model", "webcam gaze pipeline"), ("version", __version__)):
        acquisition.append_child_value(key, value)
    channels = desc.append_child("channels")
    for label, eye, kind, unit in CHANNELS:
        ch = channels.append_child("channel")
        for key, value in (("label", label), ("eye", eye), ("type", kind), ("unit", unit)):
            if value:
                ch.append_child_value(key, value)
        system = SCREEN if kind.startswith("Screen") else HEAD if kind.startswith("Head") else ""
        if system:
            ch.append_child_value("coordinate_system", system)
