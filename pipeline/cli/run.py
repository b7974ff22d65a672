"""`edgegaze run`, `report` and `mouse`: the pipeline on a source, its measurements, the pointer."""

from __future__ import annotations

import argparse
import sys

from pipeline import zoo
from pipeline.arguments import add_param_option, add_profile_options, add_stage_options, int_at_least, number, stage_overrides

# `run` is sync unless asked: with the file's decoder running, overlapping frames on a 2-core
# machine was 16-17 % slower end to end (three cores' work on two); frames already in memory ran
# 1.6x faster async, and a live camera's frames run through at once either way (docs/performance.md)
RUN_ASYNC = False


def add(sub) -> None:
    _add_run(sub)
    _add_report(sub)
    _add_mouse(sub)


def _run(args) -> int:
    from pipeline import runtime
    from pipeline.outputs import check_outputs, run_to_outputs
    from pipeline.sources import open_source

    options = _pipeline_options(args)
    options.precision = runtime.check_precision(options.precision, single=True)[0].upper()
    runtime.check_device(options.device)
    check_outputs(args.json, args.output, args.show, args.input)
    source = open_source(args.input, max_frames=args.max_frames, flip=args.flip)
    s = run_to_outputs(options.build(), source, args.json, args.output, args.show)
    print(f"{s.frames} frames, face in {s.frames_with_face}, detector ran on {s.detector_frames}{s.dropped_note()}, "
          f"{s.fps:.1f} frames/s (decode included){' — interrupted, outputs saved' if s.interrupted else ''}")
    if s.skipped_note:
        print(f"edgegaze: warning: {s.skipped_note}", file=sys.stderr)
    return 130 if s.interrupted else 0


def _pipeline_options(args):
    """`run`'s pipeline options; with --profile FILE, the profile's stages and runtime settings replace them."""
    from pipeline import profile

    options = profile.PipelineOptions(
        args.models, args.precision, args.device, **stage_overrides(args), tracking=not args.no_tracking,
        redetect_every=args.redetect_every, async_mode=args.async_mode, threads=args.threads, hint=args.hint,
        max_faces=args.max_faces, params=args.params)
    if not args.profile:
        return options
    options, replaced = profile.with_profile(options, profile.load(args.profile),
                                             defaults=profile.PipelineOptions(async_mode=RUN_ASYNC))
    if replaced:  # the profile wins; say so rather than drop them without a word
        flag = {"tracking": "--no-tracking", "async_mode": "--no-async" if RUN_ASYNC else "--async"}
        print(f"edgegaze: --profile {args.profile} sets the pipeline; ignored: "
              f"{', '.join(flag.get(n, '--' + n.replace('_', '-')) for n in replaced)}", file=sys.stderr)
    return options


def _report_profile(args) -> dict:
    from pipeline import profile

    return {"profile": profile.load(args.profile)} if getattr(args, "profile", None) else {}


def _report(args) -> int:
    from pipeline import runtime
    from pipeline.report.model_report import build_report

    precisions = runtime.check_precision(args.precision)
    report = build_report(args.input, args.out, models_set=args.models, precisions=precisions, frames=args.frames,
                          cpu_tdp_w=args.cpu_tdp, params=args.params, **_report_profile(args))
    if report["interrupted"]:
        print(f"interrupted: wrote report.json, report.md and plots of the {len(report['models'])} model run(s) "
              f"measured to {args.out}")
        return 130
    print(f"wrote report.json, report.md and plots to {args.out}")
    return 0


def _mouse(args) -> int:
    from pipeline.control import app

    return app.mouse_command(args)


def _add_input_models(p: argparse.ArgumentParser, input_help: str, precision_help: str, models: str = "default") -> None:
    p.add_argument("--input", required=True, help=input_help)
    p.add_argument("--models", default=models, help="model set, e.g. mediapipe or omz")
    p.add_argument("--precision", default="FP32", help=precision_help)


def _add_run(sub) -> None:
    """`run`: the pipeline over a camera, video or images."""
    p = sub.add_parser("run", help="run the face -> landmarks -> head pose -> gaze pipeline")
    _add_input_models(p, "webcam index, video file, image or folder of images",
                      "FP32, FP16, INT8 (edgegaze's), FP16-INT8 (Intel's, omz)", models=zoo.DEFAULT_SET)
    p.add_argument("--device", default="CPU", help="OpenVINO device: one that `openvino.Core().available_devices` "
                   "lists (CPU, GPU, NPU), or AUTO")
    add_stage_options(p)
    p.add_argument("--max-faces", type=int_at_least(1), default=1, help="most faces followed per frame")
    p.add_argument("--async", dest="async_mode", action=argparse.BooleanOptionalAction, default=RUN_ASYNC,
                   help="overlap a frame's head pose and gaze with the next frame's landmarks when frames wait (a "
                        "file): faster where a core is free beside the decoder; a live camera's frames run "
                        "through at once (default: --no-async, one at a time)")
    p.add_argument("--no-tracking", action="store_true", help="run the detector on every frame")
    p.add_argument("--hint", default="LATENCY", choices=["LATENCY", "THROUGHPUT"], help="OpenVINO performance hint")
    p.add_argument("--threads", type=int_at_least(0), default=None,
                   help="inference threads per model (default 1, measured cheapest here; 0: OpenVINO chooses)")
    p.add_argument("--output", help="annotated video: .mp4 or .avi")
    p.add_argument("--json", help="JSON Lines, one object per frame")
    p.add_argument("--max-frames", type=int_at_least(1), help="stop after this many frames (default: the whole input)")
    p.add_argument("--flip", action="store_true", help="mirror frames horizontally (selfie view)")
    p.add_argument("--show", action="store_true", help="live window (needs a display)")
    p.add_argument("--redetect-every", type=int_at_least(1), default=30, help="with tracking: run the detector every N frames")
    add_profile_options(p, "replaces the model and runtime options")
    add_param_option(p)
    p.set_defaults(func=_run)


def _add_report(sub) -> None:
    """`report`: FLOPs, latency, throughput, energy and profile of the stage models."""
    p = sub.add_parser("report", help="FLOPs, latency, throughput, energy and per-layer profile of every stage model")
    _add_input_models(p, "video (or image) whose frames feed the models", "comma list, e.g. FP16,FP16-INT8")
    p.add_argument("--frames", type=int_at_least(1), default=30, help="frames decoded and cycled as inputs (>= 20 timed inferences)")
    p.add_argument("--cpu-tdp", type=number(above=0), help="CPU TDP in W for the estimated-cpu-time energy (split over logical cores)")
    p.add_argument("--out", required=True, help="folder for report.json, report.md and PNG plots")
    add_profile_options(p, "its stage models at their precisions and its pipeline")
    add_param_option(p)
    p.set_defaults(func=_report)


def _add_mouse(sub) -> None:
    """`mouse`: the options are control/options.py's."""
    from pipeline.control.options import add_mouse_arguments

    p = sub.add_parser("mouse", help="drive the mouse pointer with gaze or head pose (calibration, filter, clicks)")
    add_mouse_arguments(p)
    p.set_defaults(func=_mouse)
