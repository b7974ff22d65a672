"""The README's `pip install -e ".[dev]" && pytest` on a machine without the optional parts:
their tests skip, naming the command that enables them, and under CI=true (CI installs them all)
the same tests fail instead of hiding. Run as a child pytest in which torch and ray cannot be
imported, as on a fresh venv; `.ci/fresh_venv` does the same with a real fresh venv."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import ENABLE, ROOT

TESTS = ["tests/test_prune.py::test_bad_arguments_are_one_line_errors",
         "tests/test_search_batch.py::test_ctrl_c_in_batch_leaves_no_part_files",
         "tests/test_benchmarks_run.py::test_benchmark_runs_on_a_few_frames[bench_optimize_pipeline.py]"]


def _child_pytest(tmp_path, ci: str) -> subprocess.CompletedProcess:
    hide = tmp_path / "hide"
    hide.mkdir(exist_ok=True)
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules.update(torch=None, ray=None)  # import -> ImportError\n")
    env = {**os.environ, "PYTHONPATH": str(hide), "CI": ci}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *TESTS],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_without_torch_and_ray_their_tests_skip_with_the_command(zoo_ready, tmp_path):
    proc = _child_pytest(tmp_path, "false")
    out = proc.stdout
    assert proc.returncode == 0 and "3 skipped" in out, out[-3000:]
    # pytest counts skips with one reason together: SKIPPED [2] conftest.py:NN: ray is not installed: ...
    assert re.search(rf"SKIPPED \[1\] \S+ torch is not installed: {re.escape(ENABLE['torch'])}", out), out[-3000:]
    assert re.search(rf"SKIPPED \[2\] \S+ ray is not installed: {re.escape(ENABLE['ray'])}", out), out[-3000:]
    assert ENABLE["torch"] in (ROOT / "README.md").read_text()  # the skip names the README's CPU-build command


def test_under_ci_a_missing_optional_part_fails(zoo_ready, tmp_path):
    proc = _child_pytest(tmp_path, "true")
    assert proc.returncode == 1 and "3 failed" in proc.stdout, proc.stdout[-3000:]
    assert "torch is not installed" in proc.stdout and "ray is not installed" in proc.stdout
