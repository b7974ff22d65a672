"""`edgegaze serve`: the gaze as an eye tracker's, over Gazepoint's Open Gaze API (and LSL)."""

from __future__ import annotations

import argparse

from pipeline.arguments import add_pipeline_options, int_at_least, number
from pipeline.errors import EdgegazeError


def add(sub) -> None:
    from pipeline.serve.options import DEFAULT_PORT, ServeOptions, StreamOptions

    d, s = ServeOptions(), StreamOptions()
    p = sub.add_parser("serve", help="serve the gaze over Gazepoint's Open Gaze API (PyGaze, OpenSesame, PsychoPy) "
                                     "and Lab Streaming Layer")
    p.add_argument("--input", default=d.input, help="webcam index, or a video standing in for a camera (paced at "
                                                   "its frame rate)")
    add_pipeline_options(p, "FP32, FP16, INT8 or FP16-INT8 for every stage", "replaces the model and runtime options",
                         leave_out=("max_faces",))
    p.add_argument("--host", default=d.host, help="address to listen on; anything but loopback lets other computers "
                                                 "read the gaze (said on start)")
    p.add_argument("--port", type=int_at_least(0), default=DEFAULT_PORT, help="TCP port (0: any free one, said on start)")
    p.add_argument("--lsl", action="store_true", help="also publish Lab Streaming Layer outlets (gaze and markers)")
    p.add_argument("--screen-size", type=_size, help="the SCREEN_SIZE clients see, WxH (default: the display's, "
                                                     "else 1920x1080)")
    p.add_argument("--calibration", metavar="FILE", help="calibration JSON to start with and save to (default: "
                                                         "yours for the screen size, as `edgegaze mouse` saves it)")
    p.add_argument("--user", help="whose calibration (default: the login name)")
    p.add_argument("--loop", action="store_true", help="replay a video input when it ends")
    p.add_argument("--max-frames", type=int_at_least(1), help="stop after this many frames (of each replay)")
    p.add_argument("--flip", action="store_true", help="mirror the input (selfie view)")
    p.add_argument("--max-clients", type=int_at_least(1), default=d.max_clients,
                   help="connections at once; more are closed when they connect")
    p.add_argument("--queue", type=int_at_least(1), default=d.queue,
                   help="records a client may fall behind before its oldest are dropped (counted, logged)")
    p.add_argument("--fixation-radius", type=number(above=0, high=1), default=s.fixation_radius,
                   help="fraction of the screen width a fixation's points stay within")
    p.add_argument("--fixation-min", type=number(low=0), default=s.fixation_min_s, help="s a fixation lasts to be one")
    p.add_argument("--camera-fov", type=number(above=0, high=170), default=s.camera_fov_deg,
                   help="the camera's horizontal field of view (deg), for the eyes' positions in metres")
    p.set_defaults(func=_serve)


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not WIDTHxHEIGHT, e.g. 1920x1080") from None
    if w <= 0 or h <= 0:
        raise argparse.ArgumentTypeError(f"'{text}': width and height must be above 0")
    return w, h


def options_from_args(a):
    from pipeline.arguments import pipeline_from_args
    from pipeline.serve.options import ServeOptions, StreamOptions

    spec, models, _ = pipeline_from_args(a)
    stream = StreamOptions(pace=True, loop=a.loop, fixation_radius=a.fixation_radius, fixation_min_s=a.fixation_min,
                           camera_fov_deg=a.camera_fov)
    return ServeOptions(input=a.input, host=a.host, port=a.port, lsl=a.lsl, screen_size=a.screen_size,
                        calibration=a.calibration, user=a.user, max_frames=a.max_frames, flip=a.flip,
                        max_clients=a.max_clients, queue=a.queue, stream=stream, pipeline=spec, models=models)


def _serve(args) -> int:
    from pipeline import extras
    from pipeline.serve.service import serve, stderr_log

    if args.lsl and extras.missing(["serve"]):
        raise EdgegazeError(f"--lsl needs pylsl, which this install lacks; install it with: {extras.install_hint(['serve'])}")
    if args.loop and str(args.input).isdigit():
        raise EdgegazeError("--loop replays a video; a camera (--input 0) goes on by itself")
    summary = serve(options_from_args(args), log=stderr_log)
    print(summary.line())
    return 130 if summary.stopped_by == "interrupt" else 0
