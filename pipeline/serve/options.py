"""`edgegaze serve` options, each declared once as a Setting (pipeline/settings.py): ServeOptions,
with the record stream's StreamOptions nested (which the Python API's gaze_stream takes alone);
the command line's flags, the checks and the docs table (docs/serve.md) are made from them."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.cameras import LiveOptions
from pipeline.control.options import _screen_size
from pipeline.settings import Options, section, setting
from pipeline.sources import SourceOptions
from pipeline.spec import PipelineSpec

DEFAULT_PORT = 4242  # Gazepoint's; PyGaze's libopengaze connects to 127.0.0.1:4242 and nowhere else
RECORDS = "records"


@dataclass(frozen=True)
class StreamOptions(Options):
    """How the record stream reads its source and turns faces into records."""

    prefix = "stream"
    pace: bool = setting(False, "release a video's frames at its frame rate, as a camera would (the server always "
                         "does)", flag=None)
    loop: bool = setting(False, "replay a video input when it ends (--max-frames: of each replay)", group=RECORDS)
    fixation_radius: float = setting(0.05, "fraction of the screen width a fixation's points stay within", above=0,
                                     high=1, group=RECORDS)
    fixation_min_s: float = setting(0.1, "seconds a fixation lasts to be one", low=0, flag="--fixation-min",
                                    group=RECORDS)
    camera_fov_deg: float = setting(60.0, "the camera's horizontal field of view (degrees), for the eyes' positions "
                                    "in metres", above=0, high=170, flag="--camera-fov", group=RECORDS)


@dataclass
class ServeOptions(Options):
    prefix = "serve"
    source: SourceOptions = section(SourceOptions)  # --input (a video stands in for a camera: paced at its rate)
    host: str = setting("127.0.0.1", "address to listen on; anything but loopback lets other computers read the gaze "
                        "(said on start)")
    port: int = setting(DEFAULT_PORT, "TCP port (0: any free one, said on start)", low=0, high=65535)
    lsl: bool = setting(False, "also publish Lab Streaming Layer outlets (gaze and markers)")
    screen_size: tuple[int, int] | None = setting(None, "the SCREEN_SIZE clients see, WxH (default: the display's, "
                                                  "else 1920x1080)", parser=_screen_size, metavar="WxH")
    calibration: str | None = setting(None, "calibration JSON to start with and save to (default: yours for the "
                                      "screen size, as `edgegaze mouse` saves it)", metavar="FILE")
    user: str | None = setting(None, "whose calibration (default: the login name)", metavar="NAME")
    # a camera that goes away is waited for, as long as the server runs; no records meanwhile
    live: LiveOptions = section(LiveOptions, reconnect_s=None)
    max_clients: int = setting(32, "connections at once; more are closed when they connect", low=1)
    queue: int = setting(60, "records a client may fall behind before its oldest are dropped (counted, logged)",
                         low=1)
    stream: StreamOptions = section(StreamOptions, RECORDS)
    # the pipeline: a spec (None: the default set) and where its models come from (None: the zoo; a
    # profile's or bundle's: arguments.pipeline_from_args)
    pipeline: PipelineSpec | None = None
    models: object | None = None
