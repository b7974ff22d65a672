"""Stage classes on tiny models: inputs bound by name when a stage is built (an IR that orders them
otherwise is fed the same, one that lacks one or has one more is refused), and the detector's
decoding back to frame pixels through its letterbox."""

from __future__ import annotations

import numpy as np
import pytest

import tiny
from pipeline import runtime
from pipeline.errors import ModelError
from pipeline.results import FaceResult, HeadPose, Landmarks
from pipeline.stages.blazeface import BlazeFace
from pipeline.stages.omz_gaze import OMZGaze


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEGAZE_HOME", str(tmp_path / "home"))  # compiled-model caches: not the checkout's


def _compiled(model, tmp_path):
    return runtime.compile_model(tiny.save(model, tmp_path / f"{model.get_friendly_name()}.xml"))


def _face_with_bright_right_eye() -> tuple[np.ndarray, FaceResult]:
    """A frame whose subject's right eye (on the image left) is white, the left eye black."""
    image = np.zeros((200, 300, 3), np.uint8)
    image[80:120, 80:120] = 255
    lm = Landmarks(points=np.zeros((5, 2)), score=1.0, right_eye=np.array([100.0, 100.0]), left_eye=np.array([200.0, 100.0]))
    return image, FaceResult(face=None, landmarks=lm, head_pose=HeadPose(0.0, 0.0, 0.0))


@pytest.mark.parametrize("order", [("left_eye_image", "right_eye_image", "head_pose_angles"),
                                   ("right_eye_image", "head_pose_angles", "left_eye_image")])
def test_the_gaze_network_is_fed_its_inputs_by_name_in_any_order(order, tmp_path):
    """left_eye_image (the image-left eye) gets the subject's right eye whatever the input order: a
    white right eye turns the tiny network's gaze to the image right (x > 0). Bound by position, the
    second order would have fed the eyes swapped (or the angles into an image input)."""
    stage = OMZGaze(_compiled(tiny.omz_gaze(order), tmp_path))
    assert stage.inp == {"image_left_eye": order.index("left_eye_image"), "image_right_eye": order.index("right_eye_image"),
                         "angles": order.index("head_pose_angles")}
    gaze = stage(*_face_with_bright_right_eye())
    assert gaze.vector[0] > 0.1 and gaze.yaw > 5  # the white eye fills a quarter of its patch


def test_a_model_lacking_an_input_or_with_one_more_is_refused_at_build(tmp_path):
    import openvino as ov
    import openvino.opset13 as ops

    full = tiny.omz_gaze()
    extra = ops.parameter([1, 4], np.float32, name="extra")
    extra.output(0).get_tensor().set_names({"extra"})
    with_extra = ov.Model(full.get_results(), [*full.get_parameters(), extra], "tiny-gaze-extra")
    with pytest.raises(ModelError, match="OMZGaze feeds no input named extra, which this model has"):
        OMZGaze(_compiled(with_extra, tmp_path))
    with pytest.raises(ModelError, match="OMZGaze reads input left_eye_image, which this model lacks .its inputs: input_1."):
        OMZGaze(_compiled(tiny.facemesh(), tmp_path))


def test_the_detector_decodes_back_to_frame_pixels_through_the_letterbox(tmp_path):
    """A 640x360 frame is letterboxed into 128x128 (bars above and below): the face comes back at the
    square's place in the frame, its box FACE_PX input pixels scaled to the frame."""
    detector = BlazeFace(_compiled(tiny.blazeface(), tmp_path))
    (face,) = detector(tiny.frame((420.0, 150.0), side=50, shape=(360, 640)))
    centre = (face.box[:2] + face.box[2:]) / 2
    assert np.allclose(centre, (420, 150), atol=640 / 128 * 4)  # within half the anchor grid's step
    assert face.box[2] - face.box[0] == pytest.approx(tiny.FACE_PX * 640 / 128, rel=1e-3)
    assert face.keypoints.shape == (6, 2) and face.keypoints[0, 0] < face.keypoints[1, 0]  # right eye on the image left
    assert detector(tiny.frame(None, shape=(360, 640))) == []
