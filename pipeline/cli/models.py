"""`edgegaze models list|show|fetch` and `edgegaze convert`: the zoo and its IR."""

from __future__ import annotations

import argparse

from pipeline.errors import EdgegazeError


def add(sub) -> None:
    _add_models(sub)
    _add_convert(sub)


def _models_list(args) -> int:
    from pipeline import catalog, zoo
    from pipeline.results import STAGE_KINDS

    rows = [("id", "set", "stage", "precisions", "cached", "size", "license")]
    for m in catalog.zoo_models(args.set):
        size = sum(m.cached(f).stat().st_size for f in m.files if m.cached(f).exists())
        rows.append((m.id, m.set, m.stage, ",".join(m.precisions), "yes" if m.is_cached() else "no",
                     f"{size / 1e6:.1f} MB" if size else "-", m.license))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    for name, chosen in zoo.sets().items() if args.set in (None, "all") else [(args.set, zoo.sets()[args.set])]:
        own = zoo.set_precisions(name)  # what `run` runs at the default --precision FP32
        if own:
            flags = [f"--{k.replace('_', '-')} {v}@FP32" for k, v in chosen.items()
                     if k in STAGE_KINDS and isinstance(v, str) and set(catalog.models_of(v)) & set(own)]
            print(f"the {name} set runs " + ", ".join(f"{m} at {p}" for m, p in own.items()) + " and every other model "
                  f"at --precision (FP32 by default); {' '.join(flags)} runs FP32 there")
            for m, p in own.items():
                if made := zoo.recipe(zoo.get(m), p):
                    people = list(made.get("check", {}).get("people_left_out", {}).values())
                    budget = ", ".join(f"{k} {v:g}" for k, v in made.get("budget", {}).items())
                    checked = (f"{sum(people) / len(people):.2f} mean from FP32 on a person no step saw "
                               f"({min(people):g}-{max(people):g} over {len(people)} people; budget {budget})") if people else \
                        f"budget {budget}"
                    print(f"  {m} {p}: edgegaze's own, {checked}; recipe: {zoo.recipe_path(zoo.get(m), p)}")
    return 0


def _models_show(args) -> int:
    from pipeline.stages.params import describe

    print(describe(args.id))
    return 0


def _models_fetch(args) -> int:
    from pipeline import catalog, zoo

    for spec in catalog.zoo_models(_selected_set(args), args.model):
        files = zoo.fetch(spec, mirror=args.mirror)
        print(f"{spec.id}: {len(files)} file(s) verified in {files[0].parent.parent}")
    return 0


def _convert(args) -> int:
    from pipeline import catalog, convert, zoo

    precisions = [p.strip().upper() for p in args.precision.split(",") if p.strip()]
    convertible = sorted({p for spec in zoo.select("all") for p in spec.precisions})
    if not precisions:  # converted nothing and exited 0
        raise EdgegazeError(f"--precision names no precision; give a comma list of {', '.join(convertible)}")
    for precision in precisions:
        if precision not in convertible:
            raise EdgegazeError(f"convert makes {', '.join(convertible)}, not '{precision}' "
                                "(INT8 and pruned forms come from `edgegaze optimize`)")
    for spec in catalog.zoo_models(_selected_set(args), args.model):
        for precision in precisions:
            if precision in spec.precisions:
                convert.convert(spec, precision, force=args.force)
            else:
                print(f"{spec.id}: no {precision} form (it has {', '.join(spec.precisions)}); skipped")
    return 0


def _selected_set(args) -> str | None:
    """--set as given; mediapipe when neither --set nor --model is (so that both can be checked)."""
    return args.set or (None if args.model else "mediapipe")


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", help="model set: mediapipe, omz, 3ddfa or all (default: mediapipe, unless --model is given)")
    p.add_argument("--model", help="one model id (see `edgegaze models list`)")


def _add_models(sub) -> None:
    """`models list`, `models fetch`."""
    models = sub.add_parser("models", help="list and fetch zoo models").add_subparsers(dest="action", required=True)
    p = models.add_parser("list", help="every zoo model, cached or not")
    p.add_argument("--set", default="all", help="model set: mediapipe, omz, 3ddfa or all")
    p.set_defaults(func=_models_list)
    p = models.add_parser("show", help="what runs a model: implementation, stage, requires, outputs, parameters")
    p.add_argument("id", help="zoo model id, or mesh")
    p.set_defaults(func=_models_show)
    p = models.add_parser("fetch", help="fetch model files into the cache, verified by sha256")
    _add_selection(p)
    p.add_argument("--mirror", help="local copy of the OpenVINO model storage (intel/<model>/<precision>/); several folders "
                   "joined with ':' are tried in turn (e.g. one holding 3ddfa_v2/); env EDGEGAZE_MIRROR")
    p.set_defaults(func=_models_fetch)


def _add_convert(sub) -> None:
    """`convert`: zoo models to OpenVINO IR."""
    p = sub.add_parser("convert", help="convert fetched models to OpenVINO IR")
    _add_selection(p)
    p.add_argument("--precision", default="FP32,FP16", help="comma list: FP32, FP16 (OMZ models also FP16-INT8)")
    p.add_argument("--force", action="store_true", help="rebuild even when the IR is up to date")
    p.set_defaults(func=_convert)
