"""edgegaze: an OpenVINO edge pipeline, face -> landmarks -> head pose -> gaze.

Reading order follows the product: zoo -> convert -> optimize -> stages -> runner -> report -> control.
"""

import importlib
import os

__version__ = "0.1.0"

# OpenCV's and FFmpeg's own log lines ("moov atom not found", V4L2 warnings) would follow our
# one-line errors; silence them before anything imports cv2.
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")

# filelock registers fork hooks when it is imported. OpenVINO's telemetry forks from a thread of its
# own while the main thread goes on importing; a filelock import between that fork's before- and
# after-hooks left its after-hook without state, and stderr got "Exception ignored in
# _resume_parent_after_fork ... KeyError" under a one-line error (9 of 100 runs of a failing
# `optimize pipeline` on a loaded machine). Imported here, before anything can start a thread.
importlib.import_module("filelock")
