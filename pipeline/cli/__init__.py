"""edgegaze: find faces, landmarks, head pose and gaze in a webcam, video or images with OpenVINO on
the CPU; fetch and convert the models, quantize or prune them, measure them, and drive the mouse.

The `edgegaze` command is a thin shell that parses arguments and calls one library function; each
module here adds its subcommands (models.py, run.py, deploy.py, optimize.py, evaluate.py, serve.py) and
handles them.
A user mistake (EdgegazeError or a bad argument) prints one line and exits 2, a setting named by
its flag (a ConfigError's field: pipeline/arguments.py); Ctrl-C exits 130.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import signal
import sys

from pipeline import extras
from pipeline.arguments import flag
from pipeline.errors import ConfigError, EdgegazeError


# the commands that run pipelines in this process (batch and the search run theirs in Ray workers)
PIPELINE_COMMANDS = ("run", "mouse", "report", "eval", "serve")


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it has one (not for flags and unset options)."""

    def _get_help_string(self, action):
        if action.default is None or isinstance(action.default, bool) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """A bad argument is one line on stderr and exit 2, like every other user mistake; defaults are shown."""

    def __init__(self, *args, **kw):
        kw.setdefault("formatter_class", _Help)
        super().__init__(*args, **kw)

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)  # what error() looks at for its hint
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}{self._dash_hint(message)} (see {self.prog} --help)\n")

    def _dash_hint(self, message: str) -> str:
        """argparse reads a value that starts with '-' (--screen-size -5x100, --beta -1e-3) as the next
        option and says only 'expected one argument'; the OPTION=VALUE form passes it on to be checked."""
        m = re.fullmatch(r"argument (\S+): expected one argument", message)
        argv = getattr(self, "_argv", [])
        for option in m.group(1).split("/") if m else ():
            value = argv[argv.index(option) + 1] if option in argv[:-1] else ""
            # not when the value was left out and the next word is an option (or its abbreviation)
            if value.startswith("-") and not any(o.startswith(value.split("=")[0]) for o in self._option_string_actions):
                return f"; for the value '{value}' write {option}={value}"
        return ""


def build_parser(prog: str = "edgegaze") -> argparse.ArgumentParser:
    from pipeline import __version__
    from pipeline.cli import deploy, evaluate, models, optimize, run, serve

    parser = _Parser(prog=prog, description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (models, run, deploy, optimize, evaluate, serve):
        module.add(sub)
    return parser


@functools.cache  # once per process: main() may be called many times (tests)
def _forked_children_ignore_ctrl_c() -> None:
    """OpenVINO's telemetry posts from a child it forks (no exec); Ctrl-C reaches the whole process
    group, and that child printed a KeyboardInterrupt traceback under 'edgegaze: interrupted' (1 of
    12 runs stopped within 0.3 s). Children forked without exec ignore SIGINT: they end on their
    own. Children that exec (Ray's, subprocesses) start with their own handlers."""
    os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def main(argv: list[str] | None = None, prog: str = "edgegaze") -> int:
    try:  # building the parser imports numpy and the mouse options: a Ctrl-C may land there too
        _forked_children_ignore_ctrl_c()
        args = build_parser(prog).parse_args(argv)
        extras.check(" ".join(filter(None, (args.command, getattr(args, "action", None)))))
        if args.command in PIPELINE_COMMANDS:
            from pipeline.runner import use_one_opencv_thread

            use_one_opencv_thread()  # the application's choice, not the library's (runner.py says why)
        return args.func(args) or 0
    except EdgegazeError as e:
        message = e.words(flag) if isinstance(e, ConfigError) else str(e)  # a setting: named by its flag
        print(f"edgegaze: error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:  # an optional module imported where no command check foresaw it
        if not extras.for_module(e.name):
            raise
        print(f"edgegaze: error: this needs {e.name}, which this install lacks; install it with: "
              f"{extras.install_hint([extras.for_module(e.name)])}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("edgegaze: interrupted", file=sys.stderr)
        return 130


def command(prog: str = "edgegaze") -> None:
    """The console command: main(), and a Ctrl-C that lands as main returns (Python handles a signal
    at the caller's next step; 2 of 30 runs stopped within 0.2-0.8 s showed a traceback there)
    exits without a traceback too."""
    try:
        code = main(prog=prog)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # exiting: a Ctrl-C still pending changes nothing
    except KeyboardInterrupt:
        print("edgegaze: interrupted", file=sys.stderr)
        code = 130
    raise SystemExit(code)
