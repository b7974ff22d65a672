"""`edgegaze run`, `report` and `mouse`: the pipeline on a source, its measurements, the pointer."""

from __future__ import annotations

import sys

from pipeline import zoo
from pipeline.arguments import (add_param_option, add_pipeline_options, add_profile_options, int_at_least, number,
                                pipeline_from_args)
from pipeline.cameras import LiveOptions
from pipeline.outputs import OutputOptions
from pipeline.settings import add_arguments, from_args
from pipeline.sources import SourceOptions


def add(sub) -> None:
    _add_run(sub)
    _add_report(sub)
    _add_mouse(sub)


def _run(args) -> int:
    from pipeline import runtime
    from pipeline.outputs import check_outputs, run_to_outputs
    from pipeline.runner import Pipeline

    spec, models, _ = pipeline_from_args(args)
    runtime.check_device(spec.runtime.device)
    out = from_args(OutputOptions, args)
    check_outputs(out.json, out.output, out.show, args.input)
    source = from_args(SourceOptions, args).open(from_args(LiveOptions, args), events=True)
    s = run_to_outputs(Pipeline.from_spec(spec, models), source, out.json, out.output, out.show,
                       log=lambda line: print(line, file=sys.stderr))
    print(f"{s.frames} frames, face in {s.frames_with_face}, detector ran on {s.detector_frames}{s.dropped_note()}, "
          f"{s.fps:.1f} frames/s (decode included){' — interrupted, outputs saved' if s.interrupted else ''}")
    if s.live_note:
        print(f"edgegaze: {s.live_note}", file=sys.stderr)
    if s.skipped_note:
        print(f"edgegaze: warning: {s.skipped_note}", file=sys.stderr)
    return 130 if s.interrupted else 0


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
    from pipeline.control.options import options_from_args

    o = options_from_args(args)
    return _pointing_test(o) if o.pointing.pointing_test else app.mouse_command(args)


def _pointing_test(o) -> int:
    """`mouse --pointing-test`: run it, write what was done (all of it, or the trials before a stop)."""
    from pipeline.control.pointing_test import run_pointing_test
    from pipeline.errors import EdgegazeError
    from pipeline.evaluate import pointing
    from pipeline.paths import check_out_dir

    check_out_dir(o.pointing.out, flag="--pointing-out")
    result = run_pointing_test(o)
    pointing.write(result, o.pointing.out)
    tpe = result["overall"]["tpe_bits_s"]
    line = (f"{result['trials_done']} of {result['trials_expected']} trials; TPe "
            f"{'n/a' if tpe != tpe else format(tpe, '.2f')} bits/s, errors {result['overall']['error_rate_pct']:.1f} %; "
            f"wrote pointing.json, .md, .png and .html to {o.pointing.out}")
    if result["complete"]:
        print(line)
        return 0
    if result["stopped_by"] == "interrupt":
        print(line)
        return 130
    raise EdgegazeError(f"the pointing test stopped ({result['stopped_by']}) after {result['trials_done']} of "
                        f"{result['trials_expected']} trials; they are in {o.pointing.out}/pointing.json")


def _add_run(sub) -> None:
    """`run`: the pipeline over a camera, video or images."""
    p = sub.add_parser("run", help="run the face -> landmarks -> head pose -> gaze pipeline")
    add_arguments(p, SourceOptions, required=("input",))
    add_pipeline_options(p, "FP32, FP16, INT8 (edgegaze's), FP16-INT8 (Intel's, omz)",
                         "replaces the model and runtime options")
    add_arguments(p, LiveOptions)
    add_arguments(p, OutputOptions)
    p.set_defaults(func=_run)


def _add_report(sub) -> None:
    """`report`: FLOPs, latency, throughput, energy and profile of the stage models."""
    p = sub.add_parser("report", help="FLOPs, latency, throughput, energy and per-layer profile of every stage model")
    p.add_argument("--input", required=True, help="video, image, image folder, webcam index or camera URL whose frames "
                   "feed the models")
    p.add_argument("--models", default=zoo.DEFAULT_SET, help="model set, e.g. mediapipe or omz")
    p.add_argument("--precision", default="FP32", help="comma list, e.g. FP16,FP16-INT8")
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
