"""The crop warp shared by FaceMesh and the iris stage: its fast path (a constant border where no
border pixel is read) must give the same bytes as MediaPipe's replicated border, inside the
frame, across its edges and outside it."""

import cv2
import numpy as np

from pipeline.stages.facemesh import roi_affine, warp


def _replicate(frame, crop_to_frame, size):
    a, t = crop_to_frame[:, :2], crop_to_frame[:, 2]
    m = np.hstack([a, (t + a @ [0.5, 0.5] - 0.5)[:, None]])
    return cv2.warpAffine(frame, m, (size, size), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_REPLICATE)


def test_warp_matches_replicated_border_everywhere():
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (90, 160, 3), np.uint8)
    for _ in range(300):
        # centres from well outside to well inside, sides from a few pixels to larger than the frame
        centre = rng.uniform([-30, -30], [190, 120])
        side, angle, size = rng.uniform(4, 140), rng.uniform(-np.pi, np.pi), int(rng.choice([16, 64]))
        m = roi_affine(centre, side, angle, size)
        assert np.array_equal(warp(frame, m, size), _replicate(frame, m, size)), (centre, side, angle, size)


def test_warp_hugging_the_edges():
    """Upright crops whose footprint ends exactly at, one and two pixels from each edge."""
    frame = np.random.default_rng(1).integers(0, 256, (48, 64, 3), np.uint8)
    for x0 in (-1, 0, 1, 2, 3):
        for size in (8, 16):
            for y0 in (0, 1, 48 - size - 1, 48 - size):
                m = roi_affine(np.array([x0 + size / 2, y0 + size / 2]), size, 0.0, size)
                assert np.array_equal(warp(frame, m, size), _replicate(frame, m, size))
                m = roi_affine(np.array([64 - x0 - size / 2, y0 + size / 2]), size, 0.0, size)
                assert np.array_equal(warp(frame, m, size), _replicate(frame, m, size))
