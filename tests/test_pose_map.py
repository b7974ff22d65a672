"""The head pose the gaze network is given (issue 37): the default set's own head pose mapped to the
convention of Intel's head-pose network, which the network was trained with; Intel's own head pose
taken as it is; the reported head pose never the mapped one. And the map is what the shared videos give."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import shared_path

VIDEOS = ("webcam_640x480.mp4", "webcam_1280x720.mp4", "udacity_demo_1080p.mp4", "stock_single_face_720p.mp4",
          "stock_multi_face_720p.mp4")


def _given(pipe, rel: str = "video/webcam_640x480.mp4", frames: int = 30) -> list[tuple]:
    """Per frame: (the reported head pose as yaw, pitch, roll, the head angles the gaze network was
    given, the FaceResult), the network's real inputs recorded on their way in."""
    from pipeline import open_source

    network = pipe.back["gaze"].part["network"] if hasattr(pipe.back["gaze"], "part") else pipe.back["gaze"]
    given, infer = [], network.infer
    network.infer = lambda inputs: (given.append(np.asarray(inputs[2]).ravel().copy()), infer(inputs))[1]
    out = []
    for fr in pipe.run(open_source(shared_path(rel), max_frames=frames)):
        r = fr.faces[0]
        out.append((np.array([r.head_pose.yaw, r.head_pose.pitch, r.head_pose.roll]), given[-1], r))
    network.infer = infer
    return out


def test_the_gaze_network_gets_the_mapped_pose_and_the_pipeline_reports_the_fused_one(zoo_ready):
    from pipeline import open_source
    from pipeline.results import FACE_3DMM
    from pipeline.api import build_pipeline
    from pipeline.stages.omz_gaze import OMZGaze

    offsets = np.array([OMZGaze.parameters[f"pose_{a}_offset"].default for a in ("yaw", "pitch")])
    default = build_pipeline("default")
    assert default.names["head_pose"] == "mesh+3ddfa"
    runs = _given(default)
    alone = build_pipeline("default", gaze="none")  # the same head-pose stage, no gaze network
    reported = [np.array([f.faces[0].head_pose.yaw, f.faces[0].head_pose.pitch, f.faces[0].head_pose.roll])
                for f in alone.run(open_source(shared_path("video/webcam_640x480.mp4"), max_frames=30))]
    assert len(runs) == len(reported) >= 25 and all(r.head_pose.convention == FACE_3DMM for _, _, r in runs)
    for (pose, given, _), ref in zip(runs, reported):
        assert np.allclose(pose, ref, atol=1e-9)  # the reported pose is the fused stage's, not the mapped one
        assert np.allclose(given[:2], pose[:2] + offsets, atol=1e-3) and abs(given[2]) < 1e-3  # roll levelled
    unmapped = _given(build_pipeline("default", params=["gaze-estimation-adas-0002.pose_pitch_offset=0"]))
    assert all(np.allclose(u[1][:2], u[0][:2], atol=1e-3) for u in unmapped)
    # the map reaches the network's output: a pitch offset moves the gaze (docs/gaze.md: ~0.14 deg per deg)
    shift = np.array([m[2].gaze.pitch - u[2].gaze.pitch for m, u in zip(runs, unmapped)])
    assert 0.2 < np.mean(shift) * np.sign(-offsets[1]) < 2.0


@pytest.mark.parametrize("models, head_pose", [("omz", None), ("default", "head-pose-estimation-adas-0001")])
def test_intels_head_pose_reaches_the_gaze_network_as_it_is(zoo_ready, models, head_pose):
    """The omz set (and the default with Intel's head-pose network): the pose is already in the
    network's convention, so it is not mapped (twice)."""
    from pipeline.results import INTEL
    from pipeline.api import build_pipeline

    runs = _given(build_pipeline(models, head_pose=head_pose))
    assert len(runs) >= 25
    for pose, given, r in runs:
        assert r.head_pose.convention == INTEL and np.allclose(given[:2], pose[:2], atol=1e-3)


def test_the_map_is_what_the_shared_videos_give(zoo_ready):
    """Refitted on every 3rd frame of each of the 5 shared videos (scripts/pose_map.py fits on every
    frame): Intel's head-pose network on the face box this pipeline gives it, minus the default's head
    pose, averaged per video and the videos averaged alike, is the stage's offset within 0.5 deg; and
    the mapped pitch is nearer Intel's than the unmapped one, each video scored with the offset of
    the other four (leave-one-video-out)."""
    from pipeline import open_source
    from pipeline.api import build_pipeline
    from pipeline.builder import stage
    from pipeline.stages.omz_gaze import OMZGaze

    intel = stage("head-pose-estimation-adas-0001", threads=1)
    diffs = []
    for name in VIDEOS:
        pipe = build_pipeline("default", gaze="none", max_faces=4)
        d = [np.array([(i := intel(fr.image, r)).yaw - r.head_pose.yaw, i.pitch - r.head_pose.pitch])
             for fr in pipe.run(open_source(shared_path(f"video/{name}"))) if fr.index % 3 == 0 for r in fr.faces]
        diffs.append(np.array(d))
    means = np.array([d.mean(0) for d in diffs])
    offsets = [OMZGaze.parameters[f"pose_{a}_offset"].default for a in ("yaw", "pitch")]
    assert abs(means[:, 0].mean() - offsets[0]) < 0.5 and abs(means[:, 1].mean() - offsets[1]) < 0.5
    assert offsets[1] < -3.0  # Intel's network reads the same heads several degrees higher (head up)
    lovo = [np.abs(d[:, 1] - np.delete(means[:, 1], k).mean()).mean() for k, d in enumerate(diffs)]
    assert np.mean(lovo) < np.mean([np.abs(d[:, 1]).mean() for d in diffs])
