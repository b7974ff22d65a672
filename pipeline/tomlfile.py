"""TOML in and out for edgegaze's own files (profiles, bundles' profiles, the zoo manifest):
`loads` is tomllib (tomli on Python 3.10); `dumps` writes the plain scalars and tables they hold."""

from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

loads = tomllib.loads
TOMLDecodeError = tomllib.TOMLDecodeError


def value(v) -> str:
    """One TOML value: a bool, number (floats to 4 places), string or list of them."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(round(v, 4) if isinstance(v, float) else v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lines(table: dict, prefix: str = "") -> list[str]:
    """`key = value` lines; a dict value as dotted keys (a bundle's `face.score_threshold = 0.5`)."""
    out = []
    for k, v in table.items():
        if isinstance(v, dict):
            out += _lines(v, f"{prefix}{_key(k)}.")
        elif v is not None:
            out.append(f"{prefix}{_key(k)} = {value(v)}")
    return out


def _key(k: str) -> str:
    """A bare key where TOML allows one (letters, digits, '-', '_'), else a quoted one (mesh+3ddfa)."""
    return k if k and all(c.isalnum() or c in "-_" for c in k) else value(k)


def dumps(document: dict) -> str:
    """TOML for a dict of scalars and tables; None is left out, an empty table too."""
    lines = _lines({k: v for k, v in document.items() if not isinstance(v, dict)})
    for name, table in document.items():
        if isinstance(table, dict) and table:
            lines += [""] * bool(lines) + [f"[{name}]", *_lines(table)]
    return "\n".join(lines) + "\n"
