"""User-facing errors: the CLI prints their message as one line, without a traceback.

A mistake in a setting names the setting by its field in the pipeline's spec (pipeline/spec):
"runtime.max_faces", "stages.gaze", "params". Each front end words a field its own way: the CLI as
its flag (--max-faces, pipeline/arguments.py), a profile as its TOML key ([runtime] max_faces), the
Python API as the keyword (max_faces). So a message is written once, with `{field}` (or
`{field=value}`) where it names a setting, and `Problem.words(name)` fills them in.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

# {runtime.max_faces} or {stages.gaze=dual-gaze}: a setting named in a message
_FIELD = re.compile(r"\{([a-z_]+(?:\.[\w+-]+)*)(?:=([^{}]*))?\}")


class EdgegazeError(Exception):
    """A mistake the user can fix (bad path, unknown model, missing file). Say what and how."""


def keyword(field: str, value: str | None = None) -> str:
    """A field as the Python API names it: the keyword (max_faces, gaze; params for a stage parameter)."""
    parts = field.split(".")
    name = "params" if parts[0] == "params" else parts[-1]
    if value is None:
        return name
    return f"{name}={value!r}" if name != "params" else f"params {value!r}"


@dataclass(frozen=True)
class Problem:
    """What is wrong with one setting: `field` (e.g. "runtime.max_faces") and a message that names
    settings as {field} or {field=value}."""

    field: str
    text: str

    def words(self, name: Callable[[str, str | None], str] = keyword) -> str:
        """The message with each named setting as `name(field, value)` words it."""
        return _FIELD.sub(lambda m: name(m.group(1), m.group(2)), self.text)

    def error(self) -> ConfigError:
        return ConfigError(self.text, self.field)

    def __str__(self) -> str:
        return self.words()


class ConfigError(EdgegazeError):
    """A pipeline setting that cannot be (an unknown stage, a value out of range, a stage whose
    requirement is missing), and any others found with it (`problems`, every one at once). `field`
    names the first; str() words them for the Python API, `words(name)` for another front end (the
    CLI: flags)."""

    def __init__(self, text: str, field: str, *more: Problem):
        self.problems = (Problem(field, text), *more)
        self.problem, self.field = self.problems[0], field
        super().__init__(self.words(keyword))

    @classmethod
    def of(cls, problems: list[Problem]) -> ConfigError:
        first, *more = problems
        return cls(first.text, first.field, *more)

    def words(self, name: Callable[[str, str | None], str]) -> str:
        return "; ".join(p.words(name) for p in self.problems)


class ModelError(EdgegazeError):
    """A model that cannot run: its IR missing or damaged, or not the model its stage reads."""


class InputError(EdgegazeError):
    """An input that cannot be read: a missing file, a video that does not decode, a camera that
    does not open."""


# errors of a write that the user fixes on the machine, not in the command (not a programming error)
_FIX = {errno.ENOSPC: "free some space or write elsewhere", errno.EDQUOT: "free some space or write elsewhere",
        errno.EFBIG: "write elsewhere", errno.EIO: "check the disk (dmesg) or write elsewhere",
        errno.EROFS: "write elsewhere", errno.EACCES: "choose a writable folder", errno.EPERM: "choose a writable folder"}


class WriteError(EdgegazeError):
    """A file could not be written (a full disk, an I/O error, a read-only folder). The writer has
    removed its incomplete file; the message names the file, the system's reason and the fix."""

    def __init__(self, path: str | os.PathLike, error: OSError, removed: bool | str = True):
        """`removed`: whether the incomplete file was removed, or what was done with it, in words."""
        self.error, self.errno = error, error.errno
        left = "; the incomplete file was removed" if removed is True else f"; {removed}" if removed else ""
        super().__init__(f"cannot write {path}: {reason(error)}{left}; {fix(error)}")


def reason(error: OSError) -> str:
    """The system's reason with its code: 'No space left on device (ENOSPC)'."""
    code = f" ({errno.errorcode[error.errno]})" if error.errno in errno.errorcode else ""
    return f"{error.strerror or error}{code}"


def fix(error: OSError) -> str:
    """What the user does about a failed write or unpack on the machine."""
    return _FIX.get(error.errno, "check the path and the disk")


class FaceUnreadable(EdgegazeError):
    """A stage cannot read one face in one frame: its model's output is not finite (NaN, inf) or is
    degenerate (every landmark on one spot), or no head pose fits the landmarks. The runner drops
    that face from that frame and counts it (FrameResult.dropped); the run goes on. Anything else
    a stage raises is a bug, and stops the run."""
