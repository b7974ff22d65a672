"""`edgegaze eval headpose|landmarks|faces|gaze-session`: accuracy on labeled data."""

from __future__ import annotations

from dataclasses import asdict

from pipeline.arguments import add_param_option, flag
from pipeline.evaluate.options import OnlineOptions, SessionOptions
from pipeline.results import STAGE_KINDS
from pipeline.settings import add_arguments, from_args

EVAL_KINDS = STAGE_KINDS[:4]  # the stages an evaluation may swap: eye state is not evaluated


def add(sub) -> None:
    _add_eval(sub)


def _eval(args) -> int:
    from importlib import import_module

    from pipeline import paths, runtime

    runtime.check_precision(args.precision)
    paths.check_out_dir(args.out, create=False)  # the results are written after the whole evaluation
    module = import_module(f"pipeline.evaluate.{args.kind.replace('-', '_')}")
    kw = {"overrides": {k: getattr(args, k) for k in (*EVAL_KINDS, "params")}}
    if args.kind == "gaze-session":
        o = from_args(SessionOptions, args)
        kw.update(video=o.video, steady=not o.all_frames, method=o.calibration, online_eval=_online(o.online))
    else:
        kw.update(dataset=args.dataset)
    if args.kind == "headpose":
        kw.update(flip=args.flip)
    module.evaluate(args.path, models=args.models, precisions=args.precision, out=args.out, **kw)
    print(f"wrote {args.kind.replace('-', '_')}.json, .md and PNG to {args.out}")
    return 0


def _online(o: OnlineOptions) -> dict | None:
    """gaze-session --online LAYOUT [--wrong-clicks F] [--seed N]: online.evaluate's keywords."""
    from pipeline.errors import EdgegazeError

    if o.layout is None:
        if o.wrong:
            raise EdgegazeError("--wrong-clicks injects wrong clicks into the online evaluation: give --online 5 too")
        return None
    return asdict(o)


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
        p.add_argument("--models", default="default", help="comma list of model sets, e.g. default,mediapipe,omz")
        p.add_argument("--precision", default="FP32", help="comma list, e.g. FP32,FP16-INT8")
        p.add_argument("--out", default=f"results/eval/{kind}", help="folder for the JSON, Markdown and PNG")
        for stage in EVAL_KINDS:
            p.add_argument(flag(f"stages.{stage}"), dest=stage, help=f"{stage.replace('_', ' ')} implementation (zoo id), "
                           "overrides the set's")
        add_param_option(p)
        if kind == "headpose":
            p.add_argument("--flip", action="store_true", help="mirror images and labels (convention check)")
        if kind == "gaze-session":
            add_arguments(p, SessionOptions)
        p.set_defaults(func=_eval)
