"""`edgegaze serve`: the gaze as an eye tracker's, over Gazepoint's Open Gaze API (and LSL)."""

from __future__ import annotations

from pipeline.arguments import add_pipeline_options
from pipeline.errors import EdgegazeError


def add(sub) -> None:
    """The flags: ServeOptions' (pipeline/serve/options.py) and the pipeline's."""
    from pipeline.serve.options import ServeOptions
    from pipeline.settings import add_arguments

    p = sub.add_parser("serve", help="serve the gaze over Gazepoint's Open Gaze API (PyGaze, OpenSesame, PsychoPy) "
                                     "and Lab Streaming Layer")
    add_arguments(p, ServeOptions)
    add_pipeline_options(p, "FP32, FP16, INT8 or FP16-INT8 for every stage", "replaces the model and runtime options",
                         leave_out=("max_faces",))
    p.set_defaults(func=_serve)


def _serve(args) -> int:
    from pipeline import extras
    from pipeline.arguments import pipeline_from_args
    from pipeline.serve.options import ServeOptions
    from pipeline.serve.service import serve, stderr_log
    from pipeline.settings import from_args

    if args.lsl and extras.missing(["serve"]):
        raise EdgegazeError(f"--lsl needs pylsl, which this install lacks; install it with: {extras.install_hint(['serve'])}")
    if getattr(args, "stream.loop") and str(getattr(args, "source.input")).isdigit():
        raise EdgegazeError("--loop replays a video; a camera (--input 0) goes on by itself")
    spec, models, _ = pipeline_from_args(args)
    summary = serve(from_args(ServeOptions, args, pipeline=spec, models=models), log=stderr_log)
    print(summary.line())
    return 130 if summary.stopped_by == "interrupt" else 0
