"""One declaration per setting (pipeline/settings.py): the one reader and its boolean vocabulary,
None's spelling (threads = 0 in an old profile), flags and --help made from a declaration, and the
docs' option tables made from theirs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pytest

from pipeline import settings
from pipeline.builder import resolve
from pipeline.settings import Options, Refused, section, setting
from pipeline.spec import Hint, PipelineSpec, RuntimeOptions

ROOT = Path(__file__).resolve().parents[2]


class Shape(StrEnum):
    ROUND = "round"
    SQUARE = "square"


@dataclass(frozen=True)
class Inner(Options):
    gain: tuple[float, float] = setting((1.0, 2.0), "per-axis gain", above=0)
    on: bool = setting(True, "whether it runs")


@dataclass(frozen=True)
class Example(Options):
    prefix = "example"

    count: int = setting(3, "how many", low=1)
    shape: Shape = setting(Shape.ROUND, "which shape")
    workers: int | None = setting(None, "workers (0: the tool chooses)", low=0, none=0, flag="--jobs")
    inner: Inner = section(Inner, "inner things")


@pytest.mark.parametrize("text, value", [("true", True), ("Yes", True), ("on", True), ("1", True),
                                         ("false", False), ("NO", False), ("off", False), ("0", False)])
def test_one_boolean_vocabulary_for_every_setting(text, value):
    assert RuntimeOptions.read("tracking", text) is value
    spec = resolve(PipelineSpec.from_set().with_params([f"dual-gaze.iris={text}"]))
    assert spec.stages["gaze"].params == {"iris": value}
    with pytest.raises(Refused, match="must be true or false, not 'maybe'"):
        RuntimeOptions.read("tracking", "maybe")


def test_a_closed_set_is_an_enum_read_by_name_in_any_case():
    assert RuntimeOptions.read("hint", "throughput") is Hint.THROUGHPUT
    assert RuntimeOptions().hint == "LATENCY" and RuntimeOptions.options()["hint"].choices == ("LATENCY", "THROUGHPUT")
    assert RuntimeOptions.problem("hint", "FAST") == "must be LATENCY or THROUGHPUT, not 'FAST'"


def test_threads_zero_in_an_old_profile_reads_as_the_runtime_choosing_and_writes_back_as_zero():
    old = ('version = 1\n[stages]\nface = "face-detection-short-range@FP32"\nlandmarks = "face-landmark@FP32"\n'
           'head_pose = "mesh"\ngaze = "iris-landmark@FP32"\neye_state = "none"\n[runtime]\nthreads = 0\n')
    spec = PipelineSpec.from_toml(old)
    assert spec.runtime.threads is None and spec.runtime == RuntimeOptions(threads=0) and not spec.check()
    assert "threads = 0" in spec.to_toml() and PipelineSpec.from_toml(spec.to_toml()) == spec
    assert RuntimeOptions.read("threads", "0") is None and RuntimeOptions.read("threads", 2) == 2


def test_flags_help_and_the_dataclass_come_from_the_declaration():
    p = argparse.ArgumentParser()
    settings.add_arguments(p, Example)
    made = settings.from_args(Example, p.parse_args([]))
    assert made == Example()
    made = settings.from_args(Example, p.parse_args(["--count", "5", "--shape", "SQUARE", "--jobs", "0",
                                                     "--gain", "3", "--no-on"]))
    assert made == Example(count=5, shape=Shape.SQUARE, workers=None, inner=Inner(gain=(3.0, 3.0), on=False))
    text = p.format_help()
    assert "inner things:" in text and "per-axis gain (default: 1,2)" in text and "--on, --no-on" in text
    assert "{round,square}" in text and "--jobs JOBS" in text


@pytest.mark.parametrize("args, says", [(["--count", "0"], "argument --count: 0 is below 1"),
                                        (["--count", "x"], "argument --count: 'x' is not a whole number"),
                                        (["--gain", "1,0"], "0 must be above 0 in '1,0'"),
                                        (["--shape", "oval"], "invalid choice: 'oval'")])
def test_a_bad_flag_is_one_line_naming_it(args, says, capsys):
    p = argparse.ArgumentParser()
    settings.add_arguments(p, Example)
    with pytest.raises(SystemExit):
        p.parse_args(args)
    assert says in capsys.readouterr().err


def test_a_required_setting_has_no_default(capsys):
    """`run` requires --input, which the mouse and the server default to webcam 0 (sources.SourceOptions)."""
    p = argparse.ArgumentParser()
    settings.add_arguments(p, Example, required=("count",))
    assert settings.from_args(Example, p.parse_args(["--count", "4"])).count == 4
    assert "how many\n" in p.format_help()  # no "(default: 3)"
    with pytest.raises(SystemExit):
        p.parse_args([])
    assert "the following arguments are required: --count" in capsys.readouterr().err


def test_check_names_each_field_its_values_cannot_be():
    bad = Example(count=0, shape="oval", workers=-1)
    assert [(p.field, str(p)) for p in bad.check()] == [
        ("example.count", "count must be a whole number at least 1, not 0"),
        ("example.shape", "shape must be round or square, not 'oval'"),
        ("example.workers", "workers must be a whole number at least 0, not -1")]
    assert not Example().check()


def test_the_docs_option_tables_are_the_declarations():
    """scripts/options_tables.py writes them; a page that holds another table fails here."""
    pages = [p for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))] if "<!-- options:" in p.read_text()]
    assert len(pages) >= 2
    for page in pages:
        assert settings.refresh_tables(page.read_text()) == page.read_text(), \
            f"{page.name}: run python scripts/options_tables.py"


def test_the_pointer_s_parts_take_their_defaults_from_the_settings():
    """The One Euro filter, the eye closure, the dwell and blink detectors and triggers, the server's
    fixation filter and the live calibration retyped the options' defaults; each is the declaration's."""
    import inspect

    from pipeline.control import app, clicks, filters, triggers
    from pipeline.control.mapping import MotionConfig
    from pipeline.control.options import MouseOptions
    from pipeline.serve import records
    from pipeline.serve.options import StreamOptions

    motion, click, stream, mouse = MotionConfig(), clicks.ClickConfig(), StreamOptions(), MouseOptions()
    dwell = {"time_s": click.dwell_s, "radius_px": click.dwell_radius_px}
    blink = {"min_s": click.blink_min_s, "max_s": click.blink_max_s}
    expected = [(filters.PointFilter, {"min_cutoff": motion.min_cutoff, "beta": motion.beta}),
                (clicks.EyeClosure, {"open_threshold": click.eye_open_threshold, "closed_ratio": click.lid_closed_ratio,
                                     "ear_threshold": click.ear_threshold}),
                (clicks.DwellClicker, dwell), (triggers.Dwell, dwell), (clicks.BlinkClicker, blink),
                (triggers.Blink, {**blink, "lead_s": click.blink_lead_s}),
                (records.FixationFilter, {"radius": stream.fixation_radius, "min_s": stream.fixation_min_s}),
                (app.calibrate_live, {"layout": mouse.targets, "method": mouse.calibration_method})]
    for made, declared in expected:
        parameters = inspect.signature(made).parameters
        assert {k: parameters[k].default for k in declared} == declared, made.__name__
