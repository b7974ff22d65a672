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

    def __init__(self, path: str | os.PathLike, error: OSError, removed: bool = True):
        self.errno = error.errno
        reason = error.strerror or str(error)
        code = f" ({errno.errorcode[error.errno]})" if error.errno in errno.errorcode else ""
        left = "; the incomplete file was removed" if removed else ""
        super().__init__(f"cannot write {path}: {reason}{code}{left}; "
                         f"{_FIX.get(error.errno, 'check the path and the disk')}")
