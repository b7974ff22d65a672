"""Command-line argument types and the options several commands share, below both the CLI
(pipeline/cli/) and the gaze mouse's options (control/options.py), so neither imports the other.

The pipeline's options are the spec's (pipeline/spec): the stage flags are its stage kinds, the
runtime flags its RuntimeOptions fields (help, values and default declared there), and
`spec_from_args` makes the spec of what was given. `flag` is how the CLI names a spec field in a
message (--max-faces for runtime.max_faces). No heavy imports: the parser is built before any
model is loaded.
"""

from __future__ import annotations

import argparse
import math
import sys

from pipeline import zoo
from pipeline.bundle import BundlePath
from pipeline.results import STAGE_KINDS
from pipeline.settings import Bounds, add_arguments, from_args
from pipeline.spec import PipelineSpec, RuntimeOptions

# a spec field whose flag is not "--" + its name with dashes (a runtime option's is declared with it)
FLAGS = {"set": "--models", "params": "--param"}


def flag(field: str, value: str | None = None) -> str:
    """A spec field as the CLI names it: runtime.max_faces -> --max-faces, stages.head_pose -> --head-pose,
    params.ID -> --param; with a value, as it was given (--gaze dual-gaze)."""
    section, _, rest = field.partition(".")
    option = RuntimeOptions.options().get(rest) if section == "runtime" else None
    name = FLAGS.get(field) or FLAGS.get(section) or (option and option.flag_name()) or \
        "--" + (rest or section).split(".")[0].replace("_", "-")
    return name if value is None else f"{name} {value}"


def int_at_least(low: int):
    """argparse type: a whole number >= low."""
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


def add_stage_options(p: argparse.ArgumentParser) -> None:
    """--face/--landmarks/--head-pose/--gaze/--eye-state: swap one stage's implementation."""
    for kind in STAGE_KINDS:
        p.add_argument(flag(f"stages.{kind}"), dest=kind, help=f"{kind.replace('_', ' ')} implementation: a zoo "
                       "model id (or 'none'); mixes sets; ID@PRECISION runs that stage at its own precision "
                       "(e.g. a pruned CH20)")


def add_runtime_options(p: argparse.ArgumentParser, leave_out: tuple[str, ...] = ()) -> None:
    """A flag per RuntimeOptions field (but those left out), as declared: --device, --hint, --threads,
    --tracking/--no-tracking, --redetect-every, --async/--no-async, --max-faces."""
    add_arguments(p, RuntimeOptions, leave_out)


def add_pipeline_options(p: argparse.ArgumentParser, precision_help: str, profile_help: str,
                         leave_out: tuple[str, ...] = ()) -> None:
    """What builds a pipeline: --models, --precision, the stage flags, the runtime flags, --param,
    and --profile/--bundle."""
    p.add_argument("--models", default=zoo.DEFAULT_SET, help="model set, e.g. mediapipe or omz (docs/gaze.md)")
    p.add_argument("--precision", default="FP32", help=precision_help)
    add_stage_options(p)
    add_runtime_options(p, leave_out)
    add_profile_options(p, profile_help)
    add_param_option(p)


def add_param_option(p: argparse.ArgumentParser) -> None:
    """--param STAGE.KEY=VALUE (repeatable), checked when the pipeline is built (PipelineSpec.with_params)."""
    p.add_argument("--param", dest="params", action="append", metavar="STAGE.KEY=VALUE",
                   help="a stage parameter, STAGE a zoo id or mesh, e.g. face-detection-short-range.score_threshold=0.7 "
                        "(repeatable; `edgegaze models show ID` lists them)")


def add_profile_options(p: argparse.ArgumentParser, what: str, required: bool = False) -> None:
    """--profile FILE or --bundle DIR_OR_ARCHIVE (a profile loads from either: pipeline.profile.load)."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--profile", help=f"deployment profile TOML (edgegaze optimize pipeline): {what}")
    g.add_argument("--bundle", dest="profile", metavar="DIR_OR_ARCHIVE", type=BundlePath,
                   help="a bundle from `edgegaze deploy` (folder or .tar.gz): its profile and models, checked first")


def spec_from_args(args) -> PipelineSpec:
    """The spec of the pipeline options given (add_pipeline_options'), without --param. With
    --profile/--bundle its stages are left to the profile (a bundle runs without the zoo)."""
    from pipeline import runtime

    options = from_args(RuntimeOptions, args)
    if getattr(args, "profile", None):
        return PipelineSpec({}, options)
    precision = runtime.check_precision(args.precision, single=True)[0]  # not a hint to prune to 'XYZ'
    spec = PipelineSpec.from_set(args.models, precision, options)
    return spec.with_stages({kind: getattr(args, kind, None) for kind in STAGE_KINDS}, precision)


def given_but_replaced(args) -> list[str]:
    """The flags given that a profile replaces (its stages and the runtime options it sets), to say so."""
    replaced = [flag("set")] if args.models != zoo.DEFAULT_SET else []
    replaced += ["--precision"] if args.precision.upper() != "FP32" else []
    replaced += [flag(f"stages.{k}") for k in STAGE_KINDS if getattr(args, k, None)]
    defaults = RuntimeOptions()
    for name, s in RuntimeOptions.options().items():
        if s.profile and getattr(args, name, getattr(defaults, name)) != getattr(defaults, name):
            replaced.append(flag(f"runtime.{name}") if s.type is not bool or getattr(defaults, name) is False
                            else "--no-" + flag(f"runtime.{name}")[2:])
    return replaced


def pipeline_from_args(args):
    """(spec, models, profile) of the pipeline options given: with --profile/--bundle, the profile's
    stages and runtime options in place of the flags (those given anyway are named in one warning
    line), built from its models (a bundle's own files); then --param over the stages. The spec is
    resolved (builder.resolve): every problem, --param's included, is one error before any input opens."""
    from pipeline import builder
    from pipeline import profile as profiles

    spec, models, profile = spec_from_args(args), builder.ZOO, None
    if getattr(args, "profile", None):
        profile = profiles.load(args.profile)
        replaced = given_but_replaced(args)
        if replaced:  # the profile wins; say so rather than drop them without a word
            print(f"edgegaze: --profile {args.profile} sets the pipeline; ignored: {', '.join(replaced)}", file=sys.stderr)
        spec, models = profile.over(spec), profile.models
    return builder.resolve(spec.with_params(args.params)), models, profile

