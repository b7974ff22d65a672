"""`edgegaze serve` options, declared once: ServeOptions, with the record stream's StreamOptions
nested (which the Python API's gaze_stream takes alone); the command line and the API build them."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.spec import PipelineSpec

DEFAULT_PORT = 4242  # Gazepoint's; PyGaze's libopengaze connects to 127.0.0.1:4242 and nowhere else


@dataclass(frozen=True)
class StreamOptions:
    """How the stream reads its source and turns faces into records."""

    pace: bool = False  # release a video's frames at its frame rate, as a camera would
    loop: bool = False  # replay a video when it ends
    fixation_radius: float = 0.05  # fraction of the screen width a fixation's points stay within
    fixation_min_s: float = 0.1  # a fixation is valid once held this long
    camera_fov_deg: float = 60.0  # the camera's horizontal field of view, for the eyes' positions


@dataclass
class ServeOptions:
    input: str = "0"  # webcam index, or a video standing in for one (its frames paced at its rate)
    host: str = "127.0.0.1"  # loopback unless told otherwise
    port: int = DEFAULT_PORT  # 0: any free port (said on start)
    lsl: bool = False  # also publish Lab Streaming Layer outlets
    screen_size: tuple[int, int] | None = None  # SCREEN_SIZE's width, height; None: the display's, else 1920x1080
    calibration: str | None = None  # calibration file; None: the user's own for the screen size
    user: str | None = None  # whose calibration (default: the login name)
    max_frames: int | None = None
    flip: bool = False
    max_clients: int = 32  # connections beyond are closed at once
    queue: int = 60  # records a client may fall behind (2 s at 30 fps) before its oldest are dropped
    stream: StreamOptions = field(default_factory=lambda: StreamOptions(pace=True))
    # the pipeline: a spec (None: the default set) and where its models come from (None: the zoo; a
    # profile's or bundle's: arguments.pipeline_from_args)
    pipeline: PipelineSpec | None = None
    models: object | None = None
