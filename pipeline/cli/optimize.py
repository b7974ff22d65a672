"""`edgegaze optimize quantize|prune|pipeline` and `edgegaze batch`."""

from __future__ import annotations

from pipeline.arguments import add_param_option, add_profile_options, int_at_least, number
from pipeline.cameras import LiveOptions
from pipeline.settings import add_arguments, from_args
from pipeline.cli.models import _add_selection, _selected_set


def add(sub) -> None:
    optimize = sub.add_parser("optimize", help="make it faster: NNCF INT8 quantization, pruning, and a search for the "
                              "fastest pipeline configuration").add_subparsers(dest="action", required=True)
    _add_quantize(optimize)
    _add_prune(optimize)
    _add_search_batch(sub, optimize)


def _optimize_quantize(args) -> int:
    from pipeline.optimize import metrics, pages, quantize

    options = quantize.QuantizeOptions(preset=args.preset, budget=metrics.parse_budget(args.max_drop),
                                       ignore=tuple(args.ignore or ()), full_sensitivity=args.sensitivity,
                                       force=args.force, out=args.out, train=args.train, lr=args.lr, seed=args.seed,
                                       range_margin=args.range_margin)
    reports = quantize.quantize(_selected_set(args), args.model, args.calib, options, subset=args.subset,
                                check=args.check)
    print(pages.quantize_summary_table(reports).markdown({}))  # summary.md's table, of this run's models
    return 0 if all(not r.get("violations") for r in reports) else 1


def _optimize_prune(args) -> int:
    from pipeline import paths
    from pipeline.optimize import pages, prune

    paths.check_out_dir(args.index, create=False, flag="--index")  # the page is listed there after minutes of distillation

    options = prune.PruneOptions(method=args.method, ratio=args.ratio, calib=args.calib, steps=args.steps,
                                 then_int8=args.then_int8, tag=args.tag, per_unit=args.per_unit, max_frames=args.frames,
                                 block=args.channel_block, refit_convs=args.refit, focus=args.focus, check=args.check or ())
    report = prune.prune(args.model, options, index=args.index)
    print(pages.prune_view(report).markdown(), end="")  # prune_report.md, but its figure
    return 0


def _optimize_pipeline(args) -> int:
    from pipeline.api import search

    summary = search(args.input, args.out, budget_cpu_ms=args.budget_cpu_ms, budget_ms=args.budget_ms, datasets=args.eval,
                     max_drop=args.max_drop, space=args.space, max_candidates=args.max_candidates,
                     max_frames=args.max_frames, address=args.address)
    print(f"{len(summary['rows'])} candidates measured in {summary['seconds']} s; wrote pareto.json/.md/.png to {args.out}")
    if not summary["chosen"]:
        print("no candidate fits the budget and max drops: no profile written (see pareto.md)")
        return 1
    print(f"chosen: {summary['chosen']} -> {args.out}/profile.toml")
    return 0


def _batch(args) -> int:
    from pipeline.batch import run_batch

    s = run_batch(args.input, args.profile, args.out, args.workers, args.address, args.max_frames, params=args.params,
                  force=args.force, live=from_args(LiveOptions, args))
    print(f"{s['done']} done, {s['skipped']} skipped (finished before), {s['failed']} failed; "
          f"{s['frames']} frames, {s['frames_per_s']:.1f} frames/s; summary in {args.out}/summary.json")
    return 1 if s["failed"] else 0


def _add_quantize(optimize) -> None:
    """`optimize quantize`: NNCF INT8 inside an accuracy budget."""
    p = optimize.add_parser("quantize", help="NNCF INT8 from real frames, kept inside an accuracy budget (writes <ir>/<id>/INT8/)")
    _add_selection(p)
    p.add_argument("--calib", required=True, help="calibration source: a video, a webcam recording or an image folder; "
                   "comma-separate several (other people, light) so the INT8 model holds beyond one recording")
    p.add_argument("--check", help="other recording(s), comma-separated, the final INT8 model must also stay in budget on "
                   "(default: the last eighth of each --calib source, which no choice sees)")
    p.add_argument("--subset", type=int_at_least(1), default=100, help="calibration frames, from the first 3/4 of the --calib sources; a third as many from their "
                   "last quarter are held out, half to choose on and half to check (all to choose on with --check)")
    p.add_argument("--preset", default="performance", choices=["performance", "mixed"], help="NNCF preset")
    p.add_argument("--max-drop", action="append", metavar="METRIC=VALUE",
                   help="override a budget, e.g. head_pose_mae_deg=1.0 (repeatable, or comma-separated; "
                   "see pipeline/optimize/metrics.py)")
    p.add_argument("--ignore", action="append", metavar="PATTERN", help="regex of layer names NNCF leaves in FP32 (repeatable)")
    p.add_argument("--sensitivity", action="store_true", help="also write the full per-layer sensitivity table and PNG")
    p.add_argument("--force", action="store_true", help="re-quantize even when the INT8 IR is up to date")
    p.add_argument("--train", type=int_at_least(1), default=0, metavar="STEPS",
                   help="quantization-aware training: NNCF's INT8 of the model's PyTorch form fine-tuned by distillation "
                   "from FP32 for STEPS steps (batch 16) on the calibration items (needs the torch extra)")
    p.add_argument("--lr", type=number(above=0), default=1e-5, help="--train: learning rate (default 1e-5)")
    p.add_argument("--seed", type=int, default=0, help="--train: seed of the crops drawn and how they are moved")
    p.add_argument("--range-margin", type=number(low=1), default=1.5, help="--train: widen every activation range by this "
                   "before training, so another person's activations are not clipped (default 1.5; 1 keeps the calibration's)")
    p.add_argument("--out", default="results/quantize", help="report folder")
    p.set_defaults(func=_optimize_quantize)


def _add_prune(optimize) -> None:
    """`optimize prune`: pruning with distillation recovery."""
    p = optimize.add_parser("prune", help="prune (NNCF unstructured or channel-structured), recover by distillation, export IR "
                            "(writes <ir>/<id>/<TAG>/ with prune_report.json/.md/.html); needs the torch extra")
    p.add_argument("--model", required=True, help="face-landmark, iris-landmark, landmarks-regression-retail-0009 or head-pose-estimation-adas-0001")
    p.add_argument("--method", required=True, choices=["unstructured", "structured"],
                   help="unstructured: zero single weights (smaller compressed IR); structured: remove channels (faster)")
    p.add_argument("--ratio", type=float, required=True, help="unstructured: share of weights zeroed; structured: share of "
                   "the prunable layers' measured time to remove (0..1)")
    p.add_argument("--calib", required=True, help="video(s) or image folder(s) with faces, comma-separated; crops are cut from them")
    p.add_argument("--check", help="other people's video(s) or image folder(s), comma-separated, never trained on: the "
                   "exported model's error is also measured on their crops")
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
    p.add_argument("--index", default="results", help="folder whose index.html lists the report page (default results)")
    p.add_argument("--channel-block", type=int_at_least(1), default=16, help="structured: keep channel counts a multiple of this; "
                   "16 suits OpenVINO's CPU plugin on AVX-512 and AVX2 (8 is finer and suits AVX2 only)")
    p.set_defaults(func=_optimize_prune)


def _add_search_batch(sub, optimize) -> None:
    p = optimize.add_parser("pipeline", help="search the whole pipeline (stages, precisions, runtime) on Ray; "
                            "writes profile.toml and a Pareto report")
    p.add_argument("--input", required=True, help="video(s), comma-separated: speed, faces found and gaze are measured on them")
    p.add_argument("--eval", default="", help="labeled data, comma-separated: AFLW2000-3D folders (head-pose MAE)")
    p.add_argument("--budget-ms", type=number(above=0), help="wall ms per frame the pipeline may take")
    p.add_argument("--budget-cpu-ms", type=number(above=0), help="process CPU ms per frame the pipeline may take")
    p.add_argument("--max-drop", action="append", metavar="METRIC=VALUE", help="accuracy budget vs the FP32 reference "
                   "(deg MAE up, percentage points of frames, deg; repeatable, or comma-separated); each metric left "
                   "out has its default, head_pose_deg=1 (with --eval), faces_found=2, gaze_deg=3; METRIC=inf lifts one")
    p.add_argument("--space", default="small", choices=["small", "full"], help="candidates searched")
    p.add_argument("--max-candidates", type=int_at_least(1), help="measure at most N per phase (reference and hand-picked come first)")
    p.add_argument("--max-frames", type=int_at_least(1), default=60, help="frames per input video (default 60)")
    p.add_argument("--address", help="Ray cluster to join (default: a local Ray)")
    p.add_argument("--out", required=True, help="folder for profile.toml, pareto.json/.md/.png")
    p.set_defaults(func=_optimize_pipeline)
    p = sub.add_parser("batch", help="a deployment profile over many videos on Ray: one JSON Lines file per video")
    p.add_argument("--input", required=True, help="folder of videos, a glob ('sessions/*.mp4'), a camera URL, or a .txt "
                   "file listing camera URLs and videos, one per line")
    add_profile_options(p, "the pipeline run on every video", required=True)
    p.add_argument("--out", required=True, help="folder for <video>.jsonl, <video>.source.json and summary.json; videos "
                   "finished from the same file with the same profile are skipped")
    p.add_argument("--force", action="store_true", help="redo videos whose output came from another file, profile or "
                   "edgegaze version (else the batch stops and says which)")
    p.add_argument("--workers", type=int_at_least(1), default=2, help="videos processed at once (default 2)")
    p.add_argument("--max-frames", type=int_at_least(1), help="frames per video (a camera: until it gives up, or Ctrl-C)")
    p.add_argument("--address", help="Ray cluster to join (default: a local Ray)")
    add_arguments(p, LiveOptions)
    add_param_option(p)
    p.set_defaults(func=_batch)
