"""The `edgegaze` command: a thin shell that parses arguments and calls one library function.

A user mistake (EdgegazeError) prints one line and exits 2; Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.errors import EdgegazeError


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


def _models_fetch(args) -> int:
    from pipeline import zoo

    for spec in zoo.select(args.set, args.model):
        files = zoo.fetch(spec, mirror=args.mirror)
        print(f"{spec.id}: {len(files)} file(s) verified in {files[0].parent.parent}")
    return 0


def _convert(args) -> int:
    from pipeline import convert, zoo

    precisions = [p.strip().upper() for p in args.precision.split(",") if p.strip()]
    for spec in zoo.select(args.set, args.model):
        for precision in precisions:
            if precision in spec.precisions:
                convert.convert(spec, precision, force=args.force)
            else:
                print(f"{spec.id}: no {precision} form (it has {', '.join(spec.precisions)}); skipped")
    return 0


def _run(args) -> int:
    from pipeline.outputs import run_to_outputs
    from pipeline.runner import Pipeline
    from pipeline.sources import open_source

    source = open_source(args.input, max_frames=args.max_frames, flip=args.flip)
    pipeline = Pipeline.from_set(
        args.models, args.precision.upper(), args.device, face=args.face, landmarks=args.landmarks,
        head_pose=args.head_pose, gaze=args.gaze, eye_state=args.eye_state, hint=args.hint,
        threads=args.threads, max_faces=args.max_faces, tracking=not args.no_tracking,
        async_mode=args.async_mode)
    s = run_to_outputs(pipeline, source, args.json, args.output, args.show)
    print(f"{s.frames} frames, face in {s.frames_with_face}, detector ran on {s.detector_frames}, "
          f"{s.fps:.1f} frames/s (decode included){' — interrupted, outputs saved' if s.interrupted else ''}")
    return 130 if s.interrupted else 0


def _add_selection(p: argparse.ArgumentParser, default_set: str | None = None) -> None:
    p.add_argument("--set", default=default_set, help="model set: mediapipe, omz or all")
    p.add_argument("--model", help="one model id (see `edgegaze models list`)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edgegaze", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    models = sub.add_parser("models", help="list and fetch zoo models").add_subparsers(dest="action", required=True)
    p = models.add_parser("list", help="every zoo model, cached or not")
    p.add_argument("--set", default="all")
    p.set_defaults(func=_models_list)
    p = models.add_parser("fetch", help="fetch model files into the cache, verified by sha256")
    _add_selection(p, default_set="mediapipe")
    p.add_argument("--mirror", help="local copy of the OpenVINO model storage (intel/<model>/<precision>/); env EDGEGAZE_MIRROR")
    p.set_defaults(func=_models_fetch)

    p = sub.add_parser("convert", help="convert fetched models to OpenVINO IR")
    _add_selection(p, default_set="mediapipe")
    p.add_argument("--precision", default="FP32,FP16", help="comma list: FP32, FP16 (OMZ models also FP16-INT8)")
    p.add_argument("--force", action="store_true", help="rebuild even when the IR is up to date")
    p.set_defaults(func=_convert)

    p = sub.add_parser("run", help="run the face -> landmarks -> head pose -> gaze pipeline")
    p.add_argument("--input", required=True, help="webcam index, video file, image or folder of images")
    p.add_argument("--models", default="mediapipe", help="model set: mediapipe (default) or omz")
    p.add_argument("--precision", default="FP32", help="FP32, FP16, INT8 (edgegaze's), FP16-INT8 (Intel's, omz)")
    p.add_argument("--device", default="CPU")
    for kind in ("face", "landmarks", "head-pose", "gaze", "eye-state"):
        p.add_argument(f"--{kind}", help=f"{kind} implementation: a zoo model id (or 'none'); mixes sets")
    p.add_argument("--max-faces", type=int, default=1)
    p.add_argument("--async", dest="async_mode", action="store_true", help="pipeline stages across frames")
    p.add_argument("--no-tracking", action="store_true", help="run the detector on every frame")
    p.add_argument("--hint", default="LATENCY", choices=["LATENCY", "THROUGHPUT"], help="OpenVINO performance hint")
    p.add_argument("--threads", type=int, help="inference threads per model")
    p.add_argument("--output", help="annotated video (.mp4)")
    p.add_argument("--json", help="JSON Lines, one object per frame")
    p.add_argument("--max-frames", type=int)
    p.add_argument("--flip", action="store_true", help="mirror frames horizontally (selfie view)")
    p.add_argument("--show", action="store_true", help="live window (needs a display)")
    p.set_defaults(func=_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except EdgegazeError as e:
        print(f"edgegaze: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("edgegaze: interrupted", file=sys.stderr)
        return 130
