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
