"""Gaze / head mouse: the same as `edgegaze mouse` (see `python apps/gaze_mouse.py --help`)."""

import sys

from pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["mouse", *sys.argv[1:]]))
