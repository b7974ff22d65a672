"""User-facing errors: the CLI prints their message as one line, without a traceback."""


class EdgegazeError(Exception):
    """A mistake the user can fix (bad path, unknown model, missing file). Say what and how."""
