"""The page writer itself (pipeline/report/html.py): the index a folder keeps of its pages (a rerun
replaces its entry, processes writing at once lose none), plots inline with ids of their own, text
always escaped. The pages of each command are checked in a real browser beside the command's
tests (test_report, test_quantize, test_prune, test_search_batch, test_eval, test_benchmarks_run)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT

from pipeline.report import html

# a process that writes `n` pages into one folder, each listed in the folder's index
WRITER = """
import sys
from pathlib import Path
from pipeline.report import html
folder, name, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(n):
    page = folder / f"{name}{i}.html"
    page.write_text("<!doctype html><title>x</title>")
    html.add_to_index(folder, page, {"title": f"{name} {i}", "what": "a test", "created": html.now()})
"""


def _entries(folder) -> list[dict]:
    return json.loads((folder / "index.json").read_text())["entries"]


def test_two_processes_writing_one_index_lose_no_entry(tmp_path):
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name, "12"], cwd=ROOT)
               for name in ("a", "b")]
    assert all(w.wait(timeout=120) == 0 for w in writers)
    assert sorted(e["page"] for e in _entries(tmp_path)) == sorted(f"{n}{i}.html" for n in "ab" for i in range(12))
    assert (tmp_path / "index.html").read_text().count('<a href="a') == 12


def test_a_rerun_replaces_its_entry_and_a_page_gone_leaves_the_index(tmp_path):
    pages = [tmp_path / "report.html", tmp_path / "eval" / "faces.html"]
    for page in pages:
        page.parent.mkdir(exist_ok=True)
        page.write_text("<!doctype html>")
        html.add_to_index(tmp_path, page, {"title": page.stem, "created": "2026-01-01T00:00:00+00:00"})
    html.add_to_index(tmp_path, pages[0], {"title": "again", "created": "2026-01-02T00:00:00+00:00"})
    assert [(e["page"], e["title"]) for e in _entries(tmp_path)] == [("report.html", "again"), ("eval/faces.html", "faces")]
    pages[1].unlink()
    html.add_to_index(tmp_path, pages[0], {"title": "third", "created": "2026-01-03T00:00:00+00:00"})
    assert [e["page"] for e in _entries(tmp_path)] == ["report.html"]
    (tmp_path / "index.json").write_text("{not json")  # cut short or edited by hand: started again
    html.add_to_index(tmp_path, pages[0], {"title": "fourth", "created": "2026-01-04T00:00:00+00:00"})
    assert [e["title"] for e in _entries(tmp_path)] == ["fourth"]


def test_plots_inline_with_ids_of_their_own_and_names_escaped():
    import matplotlib.pyplot as plt

    figures = {}
    for name in ("a", "b"):
        fig, ax = plt.subplots()
        ax.bar([0, 1], [1, 2], label="<script>alert(1)</script>")
        ax.legend()
        figures[name] = fig
    _, svgs = html.save_figures(figures)
    ids = [set(re.findall(r'\bid="([^"]+)"', svg)) for svg in svgs.values()]
    assert ids[0] and ids[1] and not ids[0] & ids[1]  # two plots on one page share no id
    assert all(svg.startswith("<svg") and "&lt;script&gt;" in svg and "<script" not in svg for svg in svgs.values())
    assert str(html.code_spans("`<b>` & <i>")) == "<code>&lt;b&gt;</code> &amp; &lt;i&gt;"
    assert [html.show(v) for v in (None, float("nan"), float("inf"), 1.234, True, "x")] == ["n/a", "n/a", "n/a", "1.23",
                                                                                          "yes", "x"]


def test_pages_render_strictly_from_views():
    """Every page is a View rendered by the one template (base.html.j2 and its macros), strictly: a
    name the template was not given fails the write instead of showing empty or n/a. The pages of each
    command's real result render through it in that command's tests."""
    import jinja2

    from pipeline.views import Column, Table, View

    env = html._environment()
    assert env.undefined is jinja2.StrictUndefined
    assert sorted(p.name for p in html.TEMPLATES.glob("*.j2")) == ["base.html.j2", "macros.html.j2"]
    page = {"what": "a test", "created": html.now(), "machine": "m", "files": [], "index_href": None, "view": True}
    assert "<h1>t</h1>" in html.render(View("t", []), page)
    with pytest.raises(jinja2.UndefinedError):
        html.render(View("t", []), {k: v for k, v in page.items() if k != "what"})
    # a column whose key the rows lack (a renamed JSON key) is an error naming it, never a column of n/a
    with pytest.raises(KeyError, match="'p50 ms' reads 'latency.p50_ms'"):
        Table("t", [Column("latency.p50_ms", "p50 ms")], [{"latency": {"p50": 1.0}}]).body()


def test_a_structured_prune_page_from_a_real_report(tmp_path, browser):
    """The per-unit sensitivity of a structured pruning with its sensitivity plan (no test fixture
    makes one: the suite's structured run is uniform, and the plan takes many minutes): a real
    prune_report.json (iris-landmark, ratio 0.5, tests/data/pages/) rendered as Markdown and page,
    strictly; the two show the same tables, and a unit not measured at a level reads n/a."""
    from browser import check_page, same_tables
    from pipeline.optimize import pages, prune

    report = json.loads((ROOT / "tests" / "data" / "pages" / "prune_structured.json").read_text())
    figure = prune.sensitivity_figure(report["sensitivity"], "iris-landmark: per-unit sensitivity")
    pages.write_prune(report, tmp_path, [], None, {"sensitivity": figure})
    text = check_page(browser, tmp_path / "prune_report.html", figures=1)
    assert "Per-unit sensitivity" in text and all(r["unit"] in text for r in report["sensitivity"])
    assert same_tables(browser, tmp_path / "prune_report.md", tmp_path / "prune_report.html") == 4
    assert any(len(r["error"]) == 1 for r in report["sensitivity"]) and "| n/a |" in (tmp_path / "prune_report.md").read_text()
