"""The docs cannot rot: every relative link in README.md and docs/*.md resolves (file and #anchor),
every `edgegaze ...` command line in their shell blocks parses with today's CLI (argparse only,
nothing runs), and every Python example runs on the shared data (one page's blocks in order, in
one namespace, in a temporary folder). An example marked `<!-- docs test: not run ... -->` (it
takes minutes) is checked against the signatures of the functions it calls instead."""

from __future__ import annotations

import ast
import contextlib
import inspect
import os
import re
import shlex
from pathlib import Path

import pytest

from conftest import ROOT, SHARED, shared_path

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```", re.S | re.M)
NOT_RUN = "<!-- docs test: not run"


def _blocks(page: Path, *languages: str) -> list[tuple[str, bool]]:
    """(code, marked not run) of the fenced blocks in these languages."""
    text = page.read_text()
    return [(m.group(2), text[: m.start()].rstrip().rpartition("\n")[2].startswith(NOT_RUN))  # the line above the fence
            for m in FENCE.finditer(text) if m.group(1) in languages]


def _prose(text: str) -> str:
    """The page without fenced blocks and code spans (links there are code, not links)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


# --- links ------------------------------------------------------------------------------------

def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    return [m.group(1) for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", _prose(page.read_text()))]


def broken_links(page: Path) -> list[str]:
    out = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            out.append(f"{target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            out.append(f"{target} (no heading #{anchor} in {file.name})")
    return out


def test_every_relative_link_resolves():
    assert sum(len(links(p)) for p in PAGES) > 40  # the pages link to each other
    problems = {p.name: broken_links(p) for p in PAGES}
    assert not any(problems.values()), {k: v for k, v in problems.items() if v}


def test_the_link_check_sees_a_broken_anchor(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("# A `x` title, with: punctuation\n\n[ok](#a-x-title-with-punctuation) [bad](#nope) [gone](b.md)\n"
                    "`[code](c.md)` and\n```text\n[block](d.md)\n```\n")
    assert broken_links(page) == ["#nope (no heading #nope in a.md)", "b.md (no such file)"]


# --- command lines ----------------------------------------------------------------------------

def command_lines(code: str) -> list[str]:
    """The `edgegaze ...` commands of a shell block: continuations joined, shell variables set in the
    block substituted (others become a placeholder), comments and `&&`/`;`/`|` chains split off."""
    joined = re.sub(r"\\\n\s*", " ", code)
    variables = dict(re.findall(r"^(\w+)=(\S+)$", joined, re.M))
    out = []
    for line in joined.splitlines():
        line = re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), "X"), line)
        for part in re.split(r"&&|;|\|(?!\|)", " ".join(shlex.split(line, comments=True))):
            if part.strip().startswith("edgegaze "):
                out.append(part.strip())
    return out


def _all_commands() -> list[tuple[str, str]]:
    return [(p.name, c) for p in PAGES for code, _ in _blocks(p, "bash", "sh", "shell", "console")
            for c in command_lines(code)]


def test_every_command_in_the_docs_parses_with_todays_cli(capsys):
    from pipeline.cli import build_parser

    commands = _all_commands()
    assert len(commands) >= 25 and {c.split()[1] for _, c in commands} >= {
        "run", "report", "optimize", "batch", "eval", "mouse", "models", "convert"}
    bad = []
    for page, command in commands:
        try:
            build_parser().parse_args(shlex.split(command)[1:])
        except SystemExit:
            bad.append(f"{page}: {command}: {capsys.readouterr().err.strip()}")
    assert not bad, "\n".join(bad)


def test_command_lines_are_read_as_a_shell_would():
    code = "V=../v\nedgegaze run --input $V/a.mp4 \\\n   --json o.jsonl   # a comment\npip install x && edgegaze models list\n"
    assert command_lines(code) == ["edgegaze run --input ../v/a.mp4 --json o.jsonl", "edgegaze models list"]


# --- Python examples --------------------------------------------------------------------------

def _localised(code: str) -> str:
    """Examples name the shared data as ../shared/data and the repo's test data as tests/data."""
    return code.replace("../shared/data", str(SHARED)).replace('"tests/data', f'"{ROOT}/tests/data')


def _unbound_calls(code: str) -> list[str]:
    """Calls `pipeline.NAME(...)` whose NAME is not exported or whose arguments do not bind."""
    import pipeline

    bad = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "pipeline" \
                and node.attr not in pipeline.__all__:
            bad.append(f"pipeline.{node.attr} is not exported")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "pipeline" \
                and node.func.attr in pipeline.__all__:
            try:
                inspect.signature(getattr(pipeline, node.func.attr)).bind(*node.args, **{k.arg: k for k in node.keywords})
            except TypeError as e:
                bad.append(f"pipeline.{node.func.attr}(...): {e}")
    return bad


@contextlib.contextmanager
def _inside(folder: Path):
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p, "python")], ids=lambda p: p.name)
def test_every_python_example_runs(page, zoo_ready, tmp_path):
    shared_path("video/udacity_demo_1080p.mp4")
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    with _inside(tmp_path):
        for code, not_run in _blocks(page, "python"):
            code = _localised(code)
            if not_run:
                compile(code, page.name, "exec")
                assert not _unbound_calls(code), _unbound_calls(code)
                continue
            # as a user's file runs it: without this module's `from __future__ import annotations`
            exec(compile(code, page.name, "exec", dont_inherit=True), namespace)
            ran += 1
    assert ran >= 1


def test_a_block_marked_not_run_is_only_checked(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("<!-- docs test: not run (minutes) -->\n```python\nslow()\n```\n\n```python\nfast()\n```\n")
    assert _blocks(page, "python") == [("slow()\n", True), ("fast()\n", False)]


def test_the_signature_check_sees_a_wrong_call():
    assert sorted(_unbound_calls("import pipeline\npipeline.build_pipeline(colour='red')\npipeline.nothing_here()")) == [
        "pipeline.build_pipeline(...): got an unexpected keyword argument 'colour'", "pipeline.nothing_here is not exported"]
