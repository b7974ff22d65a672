"""User-facing errors: the CLI prints their message as one line, without a traceback."""

from __future__ import annotations

import errno
import os


class EdgegazeError(Exception):
    """A mistake the user can fix (bad path, unknown model, missing file). Say what and how."""


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
