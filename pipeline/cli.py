"""edgegaze: find faces, landmarks, head pose and gaze in a webcam, video or images with OpenVINO on
the CPU; fetch and convert the models, quantize or prune them, measure them, and drive the mouse.

The `edgegaze` command is a thin shell that parses arguments and calls one library function.
A user mistake (EdgegazeError or a bad argument) prints one line and exits 2; Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import signal
import sys

from pipeline.bounds import Bounds
from pipeline.errors import EdgegazeError


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it has one (not for flags and unset options)."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, bool) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """A bad argument is one line on stderr and exit 2, like every other user mistake; defaults are shown."""

    def __init__(self, *args, **kw):
        kw.setdefault("formatter_class", _Help)
        super().__init__(*args, **kw)

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)  # what error() looks at for its hint
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}{self._dash_hint(message)} (see {self.prog} --help)\n")

    def _dash_hint(self, message: str) -> str:
        """argparse reads a value that starts with '-' (--screen-size -5x100, --beta -1e-3) as the next
        option and says only 'expected one argument'; the OPTION=VALUE form passes it on to be checked."""
        m = re.fullmatch(r"argument (\S+): expected one argument", message)
        argv = getattr(self, "_argv", [])
        for option in m.group(1).split("/") if m else ():
            value = argv[argv.index(option) + 1] if option in argv[:-1] else ""
            # not when the value was left out and the next word is an option (or its abbreviation)
            if value.startswith("-") and not any(o.startswith(value.split("=")[0]) for o in self._option_string_actions):
                return f"; for the value '{value}' write {option}={value}"
        return ""


def int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        return value
    return parse


def number(above: float | None = None, low: float | None = None, high: float | None = None):
    """argparse type: a finite number above `above`, in [low, high] (each bound optional)."""
    bounds = Bounds(above=above, low=low, high=high)

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
        if not bounds.allows(value):
            raise argparse.ArgumentTypeError(f"{text} must be {bounds.span()}")
        return value
    return parse


def _models_list(args) -> int:
    from pipeline import zoo

    rows = [("id", "set", "stage", "precisions", "cached", "size", "license")]
    for m in zoo.select(args.set):
        size = sum(m.cached(f).stat().st_size for f in m.files if m.cached(f).exists())
        rows.append((m.id, m.set, m.stage, ",".join(m.precisions), "yes" if m.is_cached() else "no",
                     f"{size / 1e6:.1f} MB" if size else "-", m.license))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def _models_show(args) -> int:
    from pipeline.stages.params import describe

    print(describe(args.id))
    return 0


def _models_fetch(args) -> int:
    from pipeline import zoo

    for spec in zoo.select(_selected_set(args), args.model):
        files = zoo.fetch(spec, mirror=args.mirror)
        print(f"{spec.id}: {len(files)} file(s) verified in {files[0].parent.parent}")
    return 0


def _convert(args) -> int:
    from pipeline import convert, zoo

    precisions = [p.strip().upper() for p in args.precision.split(",") if p.strip()]
    convertible = sorted({p for spec in zoo.select("all") for p in spec.precisions})
    if not precisions:  # converted nothing and exited 0
        raise EdgegazeError(f"--precision names no precision; give a comma list of {', '.join(convertible)}")
    for precision in precisions:
        if precision not in convertible:
            raise EdgegazeError(f"convert makes {', '.join(convertible)}, not '{precision}' "
                                "(INT8 and pruned forms come from `edgegaze optimize`)")
    for spec in zoo.select(_selected_set(args), args.model):
        for precision in precisions:
            if precision in spec.precisions:
                convert.convert(spec, precision, force=args.force)
            else:
                print(f"{spec.id}: no {precision} form (it has {', '.join(spec.precisions)}); skipped")
    return 0


def _run(args) -> int:
    from pipeline import runtime
    from pipeline.outputs import check_outputs, run_to_outputs
    from pipeline.runner import Pipeline
    from pipeline.sources import open_source

    _apply_profile(args)
    args.precision = runtime.check_precision(args.precision, single=True)[0]
    runtime.check_device(args.device)
    check_outputs(args.json, args.output, args.show, args.input)
    source = open_source(args.input, max_frames=args.max_frames, flip=args.flip)
    pipeline = Pipeline.from_set(
        args.models, args.precision.upper(), args.device, **stage_overrides(args), hint=args.hint,
        threads=args.threads, max_faces=args.max_faces, tracking=not args.no_tracking,
        async_mode=args.async_mode, redetect_every=args.redetect_every, params=args.params)
    s = run_to_outputs(pipeline, source, args.json, args.output, args.show)
    print(f"{s.frames} frames, face in {s.frames_with_face}, detector ran on {s.detector_frames}, "
          f"{s.fps:.1f} frames/s (decode included){' — interrupted, outputs saved' if s.interrupted else ''}")
    if s.skipped_note:
        print(f"edgegaze: warning: {s.skipped_note}", file=sys.stderr)
    return 130 if s.interrupted else 0


def _report_profile(args) -> dict:
    from pipeline import profile

    return {"profile": profile.load(args.profile)} if getattr(args, "profile", None) else {}


def _apply_profile(args) -> None:
    """`--profile FILE`: the profile's stages (ID@PRECISION) and runtime settings replace the options."""
    if getattr(args, "profile", None):
        from pipeline import profile

        kw = profile.pipeline_kwargs(profile.load(args.profile))
        defaults = build_parser().parse_args([args.command, "--input", "-"])
        flags = {name: f"--{name.replace('_', '-')}" for name in ("models", "precision", *profile.KINDS, "no_tracking",
                                                                  "threads", "redetect_every")}
        replaced = [flag for name, flag in {**flags, "async_mode": "--async"}.items()
                    if getattr(args, name, None) != getattr(defaults, name, None)]
        if replaced:  # the profile wins; say so rather than drop them without a word
            print(f"edgegaze: --profile {args.profile} sets the pipeline; ignored: {', '.join(replaced)}", file=sys.stderr)
        for kind in profile.KINDS:
            setattr(args, kind, kw[kind])
        args.no_tracking, args.async_mode = not kw["tracking"], kw["async_mode"]
        args.threads, args.redetect_every = kw["threads"], kw["redetect_every"]


def _optimize_pipeline(args) -> int:
    from pipeline import paths
    from pipeline.optimize import pareto, search

    paths.check_out_dir(args.out, create=False)  # written after the search, minutes later
    split = lambda text: [s.strip() for s in (text or "").split(",") if s.strip()]  # noqa: E731
    result = search.search(split(args.input), split(args.eval), search.parse_drops(args.max_drop), args.budget_ms,
                           args.budget_cpu_ms, args.space, args.max_candidates, args.max_frames, args.address)
    summary = pareto.write(result, args.out)
    print(f"{len(result['rows'])} candidates measured in {result['seconds']} s; wrote pareto.json/.md/.png to {args.out}")
    if not summary["chosen"]:
        print("no candidate fits the budget and max drops: no profile written (see pareto.md)")
        return 1
    print(f"chosen: {summary['chosen']} -> {args.out}/profile.toml")
    return 0


def _batch(args) -> int:
    from pipeline.batch import run_batch

    s = run_batch(args.input, args.profile, args.out, args.workers, args.address, args.max_frames, params=args.params)
    print(f"{s['done']} done, {s['skipped']} skipped (finished before), {s['failed']} failed; "
          f"{s['frames']} frames, {s['frames_per_s']:.1f} frames/s; summary in {args.out}/summary.json")
    return 1 if s["failed"] else 0


def _add_search_batch(sub, optimize) -> None:
    p = optimize.add_parser("pipeline", help="search the whole pipeline (stages, precisions, runtime) on Ray; "
                            "writes profile.toml and a Pareto report")
    p.add_argument("--input", required=True, help="video(s), comma-separated: speed, faces found and gaze are measured on them")
    p.add_argument("--eval", default="", help="labeled data, comma-separated: AFLW2000-3D folders (head-pose MAE)")
    p.add_argument("--budget-ms", type=number(above=0), help="wall ms per frame the pipeline may take")
    p.add_argument("--budget-cpu-ms", type=number(above=0), help="process CPU ms per frame the pipeline may take")
    p.add_argument("--max-drop", action="append", metavar="METRIC=VALUE", help="accuracy budget vs the FP32 reference, "
                   "e.g. head_pose_deg=1,faces_found=2,gaze_deg=3 (deg MAE up, percentage points of frames, deg; "
                   "repeatable, or comma-separated)")
    p.add_argument("--space", default="small", choices=["small", "full"], help="candidates searched")
    p.add_argument("--max-candidates", type=int_at_least(1), help="measure at most N per phase (reference and hand-picked come first)")
    p.add_argument("--max-frames", type=int_at_least(1), default=60, help="frames per input video (default 60)")
    p.add_argument("--address", help="Ray cluster to join (default: a local Ray)")
    p.add_argument("--out", required=True, help="folder for profile.toml, pareto.json/.md/.png")
    p.set_defaults(func=_optimize_pipeline)
    p = sub.add_parser("batch", help="a deployment profile over many videos on Ray: one JSON Lines file per video")
    p.add_argument("--input", required=True, help="folder of videos or a glob ('sessions/*.mp4')")
    p.add_argument("--profile", required=True, help="profile.toml from `edgegaze optimize pipeline`")
    p.add_argument("--out", required=True, help="folder for <video>.jsonl and summary.json; finished videos are skipped")
    p.add_argument("--workers", type=int_at_least(1), default=2, help="videos processed at once (default 2)")
    p.add_argument("--max-frames", type=int_at_least(1), help="frames per video")
    p.add_argument("--address", help="Ray cluster to join (default: a local Ray)")
    add_param_option(p)
    p.set_defaults(func=_batch)


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


def _optimize_quantize(args) -> int:
    from pipeline.optimize import quantize

    reports = quantize.quantize(_selected_set(args), args.model, args.calib, subset=args.subset, preset=args.preset,
                                max_drop=args.max_drop, ignore=args.ignore, full_sensitivity=args.sensitivity,
                                force=args.force, out=args.out, check=args.check)
    print(quantize.summary_markdown(reports), end="")
    return 0 if all(not r.get("violations") for r in reports) else 1


def _optimize_prune(args) -> int:
    from pipeline.optimize import prune

    options = prune.PruneOptions(method=args.method, ratio=args.ratio, calib=args.calib, steps=args.steps,
                                 then_int8=args.then_int8, tag=args.tag, per_unit=args.per_unit, max_frames=args.frames,
                                 block=args.channel_block, refit_convs=args.refit, focus=args.focus)
    report = prune.prune(args.model, options)
    print(prune.markdown([report]), end="")
    return 0


def _eval(args) -> int:
    from importlib import import_module

    from pipeline import paths, runtime

    runtime.check_precision(args.precision)
    paths.check_out_dir(args.out, create=False)  # the results are written after the whole evaluation
    module = import_module(f"pipeline.evaluate.{args.kind.replace('-', '_')}")
    kw = {"overrides": {k: getattr(args, k) for k in ("face", "landmarks", "head_pose", "gaze", "params")}}
    if args.kind == "gaze-session":
        kw.update(video=args.video, steady=not args.all_frames, method=args.calibration)
    else:
        kw.update(dataset=args.dataset)
    if args.kind == "headpose":
        kw.update(flip=args.flip)
    module.evaluate(args.path, models=args.models, precisions=args.precision, out=args.out, **kw)
    print(f"wrote {args.kind.replace('-', '_')}.json, .md and PNG to {args.out}")
    return 0


def _add_eval(sub) -> None:
    kinds = {"headpose": ("head pose MAE on AFLW2000-3D", "aflw2000", "DIR: .jpg + .mat files"),
             "landmarks": ("landmark NME by inter-ocular distance", "dlib-xml", "ibug68: DIR of images + .pts; dlib-xml: imglab XML FILE"),
             "faces": ("face detection recall, precision, AP at IoU 0.5", "dlib-xml", "imglab XML FILE"),
             "gaze-session": ("on-screen gaze error of a recorded session, leave-one-target-out", None,
                              "session DIR: screen.json and targets.csv, frame,x_px,y_px with video.mp4 (or "
                              "session.json {video}), or image,x_px,y_px for a folder of stills")}
    ev = sub.add_parser("eval", help="accuracy on labeled data").add_subparsers(dest="kind", required=True)
    for kind, (help_text, dataset, path_help) in kinds.items():
        p = ev.add_parser(kind, help=help_text)
        p.add_argument("path", help=path_help)
        if dataset:
            p.add_argument("--dataset", default=dataset, help="format (landmarks: ibug68 or dlib-xml)")
        p.add_argument("--models", default="mediapipe", help="comma list of model sets, e.g. omz,mediapipe")
        p.add_argument("--precision", default="FP32", help="comma list, e.g. FP32,FP16-INT8")
        p.add_argument("--out", default=f"results/eval/{kind}", help="folder for the JSON, Markdown and PNG")
        for stage in ("face", "landmarks", "head-pose", "gaze"):
            p.add_argument(f"--{stage}", help=f"{stage} implementation (zoo id), overrides the set's")
        add_param_option(p)
        if kind == "headpose":
            p.add_argument("--flip", action="store_true", help="mirror images and labels (convention check)")
        if kind == "gaze-session":
            p.add_argument("--video", help="video file, overriding the session's")
            p.add_argument("--all-frames", action="store_true", help="use every frame with a face, not only steady ones")
            p.add_argument("--calibration", default="auto", choices=calibration_methods(),
                           help="auto: each calibration chooses its model from its targets (default); or one model")
        p.set_defaults(func=_eval)


def calibration_methods() -> tuple[str, ...]:
    from pipeline.control.calibration import METHODS

    return METHODS


STAGE_FLAGS = ("face", "landmarks", "head-pose", "gaze", "eye-state")


def add_stage_options(p: argparse.ArgumentParser) -> None:
    """--face/--landmarks/--head-pose/--gaze/--eye-state: swap one stage's implementation."""
    for kind in STAGE_FLAGS:
        p.add_argument(f"--{kind}", help=f"{kind} implementation: a zoo model id (or 'none'); mixes sets; "
                       "ID@PRECISION runs that stage at its own precision (e.g. a pruned CH20)")


def stage_overrides(args) -> dict:
    """{kind: id} of the stage options given (Pipeline.from_set keywords)."""
    kinds = (k.replace("-", "_") for k in STAGE_FLAGS)
    return {k: getattr(args, k) for k in kinds if getattr(args, k, None)}


def add_param_option(p: argparse.ArgumentParser) -> None:
    """--param STAGE.KEY=VALUE (repeatable), checked when the pipeline is built (pipeline.stages.params)."""
    p.add_argument("--param", dest="params", action="append", metavar="STAGE.KEY=VALUE",
                   help="a stage parameter, STAGE a zoo id or mesh, e.g. face-detection-short-range.score_threshold=0.7 "
                        "(repeatable; `edgegaze models show ID` lists them)")


def _selected_set(args) -> str | None:
    """--set as given; mediapipe when neither --set nor --model is (so that both can be checked)."""
    return args.set or (None if args.model else "mediapipe")


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", help="model set: mediapipe, omz or all (default: mediapipe, unless --model is given)")
    p.add_argument("--model", help="one model id (see `edgegaze models list`)")


def _add_input_models(p: argparse.ArgumentParser, input_help: str, precision_help: str) -> None:
    p.add_argument("--input", required=True, help=input_help)
    p.add_argument("--models", default="mediapipe", help="model set: mediapipe or omz")
    p.add_argument("--precision", default="FP32", help=precision_help)


def _add_models(sub) -> None:
    """`models list`, `models fetch`."""
    models = sub.add_parser("models", help="list and fetch zoo models").add_subparsers(dest="action", required=True)
    p = models.add_parser("list", help="every zoo model, cached or not")
    p.add_argument("--set", default="all", help="model set: mediapipe, omz or all")
    p.set_defaults(func=_models_list)
    p = models.add_parser("show", help="what runs a model: implementation, stage, requires, outputs, parameters")
    p.add_argument("id", help="zoo model id, or mesh")
    p.set_defaults(func=_models_show)
    p = models.add_parser("fetch", help="fetch model files into the cache, verified by sha256")
    _add_selection(p)
    p.add_argument("--mirror", help="local copy of the OpenVINO model storage (intel/<model>/<precision>/); env EDGEGAZE_MIRROR")
    p.set_defaults(func=_models_fetch)


def _add_convert(sub) -> None:
    """`convert`: zoo models to OpenVINO IR."""
    p = sub.add_parser("convert", help="convert fetched models to OpenVINO IR")
    _add_selection(p)
    p.add_argument("--precision", default="FP32,FP16", help="comma list: FP32, FP16 (OMZ models also FP16-INT8)")
    p.add_argument("--force", action="store_true", help="rebuild even when the IR is up to date")
    p.set_defaults(func=_convert)


def _add_run(sub) -> None:
    """`run`: the pipeline over a camera, video or images."""
    p = sub.add_parser("run", help="run the face -> landmarks -> head pose -> gaze pipeline")
    _add_input_models(p, "webcam index, video file, image or folder of images",
                      "FP32, FP16, INT8 (edgegaze's), FP16-INT8 (Intel's, omz)")
    p.add_argument("--device", default="CPU", help="OpenVINO device: one that `openvino.Core().available_devices` "
                   "lists (CPU, GPU, NPU), or AUTO")
    add_stage_options(p)
    p.add_argument("--max-faces", type=int_at_least(1), default=1, help="most faces followed per frame")
    p.add_argument("--async", dest="async_mode", action=argparse.BooleanOptionalAction, default=True,
                   help="overlap a frame's head pose and gaze with the next frame's landmarks when frames wait (a "
                        "file); a live camera's frames run through at once (default; --no-async: one at a time)")
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
    p.add_argument("--profile", help="deployment profile TOML (edgegaze optimize pipeline); replaces the model and runtime options")
    add_param_option(p)
    p.set_defaults(func=_run)


def _add_report(sub) -> None:
    """`report`: FLOPs, latency, throughput, energy and profile of the stage models."""
    p = sub.add_parser("report", help="FLOPs, latency, throughput, energy and per-layer profile of every stage model")
    _add_input_models(p, "video (or image) whose frames feed the models", "comma list, e.g. FP16,FP16-INT8")
    p.add_argument("--frames", type=int_at_least(1), default=30, help="frames decoded and cycled as inputs (>= 20 timed inferences)")
    p.add_argument("--cpu-tdp", type=number(above=0), help="CPU TDP in W for the estimated-cpu-time energy (split over logical cores)")
    p.add_argument("--out", required=True, help="folder for report.json, report.md and PNG plots")
    p.add_argument("--profile", help="deployment profile TOML: its stage models at their precisions and its pipeline")
    add_param_option(p)
    p.set_defaults(func=_report)


def _add_mouse(sub) -> None:
    """`mouse`: the options are control/options.py's."""
    from pipeline.control.options import add_mouse_arguments

    p = sub.add_parser("mouse", help="drive the mouse pointer with gaze or head pose (calibration, filter, clicks)")
    add_mouse_arguments(p)
    p.set_defaults(func=_mouse)


def _add_quantize(optimize) -> None:
    """`optimize quantize`: NNCF INT8 inside an accuracy budget."""
    p = optimize.add_parser("quantize", help="NNCF INT8 from real frames, kept inside an accuracy budget (writes <ir>/<id>/INT8/)")
    _add_selection(p)
    p.add_argument("--calib", required=True, help="calibration source: a video, a webcam recording or an image folder; "
                   "comma-separate several (other people, light) so the INT8 model holds beyond one recording")
    p.add_argument("--check", help="other recording(s), comma-separated, the final INT8 model must also stay in budget on "
                   "(default: the last eighth of each --calib source, which no choice sees)")
    p.add_argument("--subset", type=int_at_least(1), default=100, help="calibration frames (a third as many are held out for validation)")
    p.add_argument("--preset", default="performance", choices=["performance", "mixed"], help="NNCF preset")
    p.add_argument("--max-drop", action="append", metavar="METRIC=VALUE",
                   help="override a budget, e.g. head_pose_mae_deg=1.0 (repeatable, or comma-separated; "
                   "see pipeline/optimize/metrics.py)")
    p.add_argument("--ignore", action="append", metavar="PATTERN", help="regex of layer names NNCF leaves in FP32 (repeatable)")
    p.add_argument("--sensitivity", action="store_true", help="also write the full per-layer sensitivity table and PNG")
    p.add_argument("--force", action="store_true", help="re-quantize even when the INT8 IR is up to date")
    p.add_argument("--out", default="results/quantize", help="report folder")
    p.set_defaults(func=_optimize_quantize)


def _add_prune(optimize) -> None:
    """`optimize prune`: pruning with distillation recovery."""
    p = optimize.add_parser("prune", help="prune (NNCF unstructured or channel-structured), recover by distillation, export IR "
                            "(writes <ir>/<id>/<TAG>/ with prune_report.json/.md); needs the torch extra")
    p.add_argument("--model", required=True, help="face-landmark, iris-landmark, landmarks-regression-retail-0009 or head-pose-estimation-adas-0001")
    p.add_argument("--method", required=True, choices=["unstructured", "structured"],
                   help="unstructured: zero single weights (smaller compressed IR); structured: remove channels (faster)")
    p.add_argument("--ratio", type=float, required=True, help="unstructured: share of weights zeroed; structured: share of "
                   "the prunable layers' measured time to remove (0..1)")
    p.add_argument("--calib", required=True, help="video(s) or image folder(s) with faces, comma-separated; crops are cut from them")
    p.add_argument("--steps", type=int_at_least(1), default=1600, help="distillation steps (batch 16) for recovery; "
                   "the iris model takes 0.2-0.3 s a step on 2 cores")
    p.add_argument("--then-int8", action="store_true", help="quantize the pruned model to INT8 (tag gets -INT8)")
    p.add_argument("--tag", help="precision tag of the output (default PRUNED<ratio%%> or CH<ratio%%>)")
    p.add_argument("--per-unit", default="sensitivity", choices=["sensitivity", "uniform"],
                   help="structured: per-unit ratios from the sensitivity analysis (default) or the same everywhere")
    p.add_argument("--frames", type=int_at_least(1), default=960, help="frames sampled from the calibration sources (the last quarter "
                   "of each is held out to measure recovery)")
    p.add_argument("--no-refit", dest="refit", action="store_false",
                   help="structured: skip the least-squares refit before distillation")
    p.add_argument("--focus", type=number(low=0), default=1.0, help="extra distillation weight on the outputs the pipeline reads "
                   "(iris model: iris centre and eye corners); 0 weighs every output alike")
    p.add_argument("--channel-block", type=int_at_least(1), default=16, help="structured: keep channel counts a multiple of this; "
                   "16 suits OpenVINO's CPU plugin on AVX-512 and AVX2 (8 is finer and suits AVX2 only)")
    p.set_defaults(func=_optimize_prune)


def build_parser(prog: str = "edgegaze") -> argparse.ArgumentParser:
    from pipeline import __version__

    parser = _Parser(prog=prog, description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_models, _add_convert, _add_run, _add_report, _add_mouse):
        add(sub)
    optimize = sub.add_parser("optimize", help="make it faster: NNCF INT8 quantization, pruning, and a search for the fastest pipeline configuration").add_subparsers(dest="action", required=True)
    _add_quantize(optimize)
    _add_prune(optimize)
    _add_search_batch(sub, optimize)
    _add_eval(sub)
    return parser


@functools.cache  # once per process: main() may be called many times (tests)
def _forked_children_ignore_ctrl_c() -> None:
    """OpenVINO's telemetry posts from a child it forks (no exec); Ctrl-C reaches the whole process
    group, and that child printed a KeyboardInterrupt traceback under 'edgegaze: interrupted' (1 of
    12 runs stopped within 0.3 s). Children forked without exec ignore SIGINT: they end on their
    own. Children that exec (Ray's, subprocesses) start with their own handlers."""
    os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def main(argv: list[str] | None = None, prog: str = "edgegaze") -> int:
    try:  # building the parser imports numpy and the mouse options: a Ctrl-C may land there too
        _forked_children_ignore_ctrl_c()
        args = build_parser(prog).parse_args(argv)
        return args.func(args) or 0
    except EdgegazeError as e:
        print(f"edgegaze: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("edgegaze: interrupted", file=sys.stderr)
        return 130


def command(prog: str = "edgegaze") -> None:
    """The console command: main(), and a Ctrl-C that lands as main returns (Python handles a signal
    at the caller's next step; 2 of 30 runs stopped within 0.2-0.8 s showed a traceback there)
    exits without a traceback too."""
    try:
        code = main(prog=prog)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # exiting: a Ctrl-C still pending changes nothing
    except KeyboardInterrupt:
        print("edgegaze: interrupted", file=sys.stderr)
        code = 130
    raise SystemExit(code)
