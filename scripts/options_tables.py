"""Write the docs' option tables again from their declarations (pipeline/settings.py: each block
between `<!-- options: module:Class -->` and `<!-- /options -->` in README.md and docs/*.md).
tests/unit/test_settings.py fails while a page holds another table than this writes.

    python scripts/options_tables.py
"""

from __future__ import annotations

from pathlib import Path

from pipeline.settings import refresh_tables

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        if refresh_tables(text) != text:
            page.write_text(refresh_tables(text))
            print(f"wrote {page.relative_to(ROOT)}")
