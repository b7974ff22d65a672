"""edgegaze: an OpenVINO edge pipeline, face -> landmarks -> head pose -> gaze.

Reading order follows the product: zoo -> convert -> optimize -> stages -> runner -> report -> control.
"""

import os

__version__ = "0.1.0"

# OpenCV's and FFmpeg's own log lines ("moov atom not found", V4L2 warnings) would follow our
# one-line errors; silence them before anything imports cv2.
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
