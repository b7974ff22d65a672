"""Frame sources: every kind of input opens or fails with one clear line."""

from __future__ import annotations

import subprocess
import sys

import cv2
import numpy as np
import pytest

from conftest import shared_path
from pipeline.errors import EdgegazeError
from pipeline.sources import open_source, prefetch


def test_video_frames_are_bgr_with_media_timestamps():
    src = open_source(shared_path("video/webcam_640x480.mp4"), max_frames=5)
    frames = list(src)
    assert len(src) == 5 and [f.index for f in frames] == [0, 1, 2, 3, 4]
    assert frames[0].image.shape == (480, 640, 3) and frames[0].image.dtype == np.uint8
    assert frames[1].timestamp == pytest.approx(1 / src.fps)


def test_flip_mirrors_frames():
    plain = next(iter(open_source(shared_path("video/webcam_640x480.mp4"), max_frames=1))).image
    flipped = next(iter(open_source(shared_path("video/webcam_640x480.mp4"), max_frames=1, flip=True))).image
    np.testing.assert_array_equal(flipped, plain[:, ::-1])


def test_image_folder_of_odd_formats_becomes_bgr(tmp_path):
    photo = cv2.imread(str(shared_path("photos/image00.jpg")))
    cv2.imwrite(str(tmp_path / "a_gray.png"), cv2.cvtColor(photo, cv2.COLOR_BGR2GRAY))
    cv2.imwrite(str(tmp_path / "b_bgra.png"), cv2.cvtColor(photo, cv2.COLOR_BGR2BGRA))
    cv2.imwrite(str(tmp_path / "c_tiny.png"), np.zeros((1, 1, 3), np.uint8))
    cv2.imwrite(str(tmp_path / "d_16bit.png"), photo.astype(np.uint16) * 257)
    (tmp_path / "notes.txt").write_text("not an image")
    frames = list(open_source(tmp_path))
    assert [f.name for f in frames] == ["a_gray.png", "b_bgra.png", "c_tiny.png", "d_16bit.png"]
    assert all(f.image.ndim == 3 and f.image.shape[2] == 3 and f.image.dtype == np.uint8 for f in frames)
    assert np.abs(frames[3].image.astype(int) - photo).max() <= 1


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.mp4", "input not found"),
    (lambda d: (d / "fake.mp4").write_text("hello") and d / "fake.mp4", "cannot decode video"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "no images"),
    (lambda d: (d / "bad.jpg").write_bytes(b"\xff\xd8garbage") and d / "bad.jpg", "cannot read image"),
    (lambda d: "57", "cannot open camera 57"),
])
def test_bad_inputs_fail_with_one_clear_line(tmp_path, make, message):
    with pytest.raises(EdgegazeError, match=message):
        open_source(make(tmp_path))


def test_cli_bad_input_has_no_traceback(tmp_path):
    (tmp_path / "fake.mp4").write_text("hello")
    proc = subprocess.run([sys.executable, "-m", "pipeline", "run", "--input", str(tmp_path / "fake.mp4")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "cannot decode video" in proc.stderr


def test_prefetch_keeps_order_and_stops_early():
    src = open_source(shared_path("video/webcam_640x480.mp4"), max_frames=30)
    seen = []
    for frame in prefetch(src, depth=2):
        seen.append(frame.index)
        if len(seen) == 10:
            break
    assert seen == list(range(10))
