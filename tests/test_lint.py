"""Names that do not exist or imports left behind (what a merge slip leaves) fail here, before a
user's run reaches the line: pyflakes over the library, apps, benchmarks, scripts and the tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_pyflakes_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "pyflakes", "pipeline", "apps", "benchmarks", "scripts", "tests"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
