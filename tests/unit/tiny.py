"""Tiny OpenVINO models for the unit tier, built with the opset API (as NNCF's tests build theirs):
each has the inputs and outputs, by name and shape, that a real stage class reads, and computes
them from its input, so the real classes (BlazeFace, FaceMesh, OMZGaze, ...) decode them and the
real runner tracks what they find. What they find is a bright square on a black frame: its
centroid is the face. No download, no shared data; a model compiles in milliseconds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops

from pipeline.stages.blazeface import anchors_for

ROOT = Path(__file__).resolve().parents[2]
# the detector's face box side in its 128 px input: wide enough that the boxes of every anchor on one
# square overlap by more than NMS's IoU (0.3), so they merge into one face
FACE_PX = 56.0
MESH_PX = 128.0  # the mesh's extent in FaceMesh's 192 px crop: the ROI (x1.5) then keeps its size


def _named(node, name: str):
    node.output(0).get_tensor().set_names({name})
    return node


def _blob(image, size: int):
    """(cx, cy, share), each [1]: the centroid, in input pixels, of the pixels brighter than mid-grey
    in an NHWC image, weighted by how much, and that weight's share of a white image's."""
    gray = ops.reduce_mean(ops.convert(image, "f32"), np.array([3]), keep_dims=False)  # [1, H, W]
    weight = ops.relu(ops.subtract(gray, np.float32(128)))
    total = ops.reduce_sum(weight, np.array([1, 2]), keep_dims=False)
    grid = np.arange(size, dtype=np.float32) + 0.5  # pixel centres
    xs, ys = np.tile(grid, (size, 1))[None], np.tile(grid[:, None], (1, size))[None]
    safe = ops.add(total, np.float32(1e-3))
    cx = ops.divide(ops.reduce_sum(ops.multiply(weight, xs), np.array([1, 2]), keep_dims=False), safe)
    cy = ops.divide(ops.reduce_sum(ops.multiply(weight, ys), np.array([1, 2]), keep_dims=False), safe)
    return cx, cy, ops.divide(total, np.float32(127 * size * size))


def blazeface() -> ov.Model:
    """BlazeFace short range (128 px): each anchor on a bright pixel scores a face of FACE_PX centred on
    the anchor, with six keypoints (eyes above the centre); weighted NMS merges a square's anchors
    into one face, and two squares apart into two."""
    size = 128
    image = ops.parameter([1, size, size, 3], np.uint8, name="input")
    gray = ops.reshape(ops.reduce_mean(ops.convert(image, "f32"), np.array([3]), keep_dims=False), np.array([-1]), False)
    anchors = anchors_for(size) * size  # [N, 2] input pixels
    at = np.minimum(anchors.astype(np.int64), size - 1)
    bright = ops.gather(gray, (at[:, 1] * size + at[:, 0]).astype(np.int64), np.int64(0))  # [N]: the pixel under each anchor
    logits = ops.reshape(ops.subtract(ops.multiply(bright, np.float32(20 / 255)), np.float32(5)),
                         np.array([1, len(anchors), 1]), False)
    keypoints = np.array([[-0.2, -0.15], [0.2, -0.15], [0, 0], [0, 0.25], [-0.45, -0.1], [0.45, -0.1]], np.float32)
    box = np.concatenate([[0, 0, FACE_PX, FACE_PX], (keypoints * FACE_PX).ravel()]).astype(np.float32)
    regressors = ops.add(ops.multiply(logits, np.float32(0)), np.tile(box, (1, len(anchors), 1)))  # [1, N, 16]
    return ov.Model([_named(regressors, "regressors"), _named(logits, "classificators")], [image], "tiny-blazeface")


def canonical_mesh() -> np.ndarray:
    """The canonical FaceMesh face (468 x 3), centred, its x/y extent MESH_PX."""
    points = np.array(json.loads((ROOT / "pipeline/stages/mesh_canonical.json").read_text())["points"], np.float32)
    points -= (points.min(0) + points.max(0)) / 2
    return points * (MESH_PX / np.ptp(points[:, :2], axis=0).max())


def facemesh() -> ov.Model:
    """FaceMesh (192 px crop): the canonical face centred on the bright square's centroid in the crop;
    its presence logit from how much of the crop is bright."""
    size = 192
    image = ops.parameter([1, size, size, 3], np.uint8, name="input_1")
    cx, cy, share = _blob(image, size)
    centre = ops.concat([cx, cy, np.zeros(1, np.float32)], 0)  # [3]
    mesh = ops.reshape(ops.add(canonical_mesh(), centre), np.array([1, 1, 1, 468 * 3]), False)
    logit = ops.subtract(ops.multiply(share, np.float32(200)), np.float32(5))  # a square fills ~6 % of its crop: +6
    presence = ops.reshape(logit, np.array([1, 1, 1, 1]), False)
    return ov.Model([_named(mesh, "conv2d_20"), _named(presence, "conv2d_30")], [image], "tiny-facemesh")


def omz_gaze(order: tuple[str, ...] = ("left_eye_image", "right_eye_image", "head_pose_angles")) -> ov.Model:
    """The OMZ gaze network's interface, its inputs in `order`: gaze x = mean(left_eye_image) -
    mean(right_eye_image) (in 0..1), y = 0, z = -1 (the network's z points away from the camera)."""
    shapes = {"left_eye_image": [1, 60, 60, 3], "right_eye_image": [1, 60, 60, 3], "head_pose_angles": [1, 3]}
    params = {name: ops.parameter(shapes[name], np.float32, name=name) for name in order}
    for name, p in params.items():
        p.output(0).get_tensor().set_names({name})

    def mean(name):
        return ops.reduce_mean(params[name], np.array([1, 2, 3]), keep_dims=False)  # [1]
    x = ops.divide(ops.subtract(mean("left_eye_image"), mean("right_eye_image")), np.float32(255))
    zero = ops.multiply(ops.reduce_sum(params["head_pose_angles"], np.array([1]), keep_dims=False), np.float32(0))
    gaze = ops.reshape(ops.concat([x, zero, ops.add(zero, np.float32(-1))], 0), np.array([1, 3]), False)
    return ov.Model([_named(gaze, "gaze_vector")], [params[n] for n in order], "tiny-gaze")


def iris() -> ov.Model:
    """The iris model's interface (two 64 px eye crops): a fixed eye contour (a circle) and iris."""
    image = ops.parameter([2, 64, 64, 3], np.float32, name="input_1")
    zero = ops.multiply(ops.reduce_mean(image, np.array([1, 2, 3]), keep_dims=True), np.float32(0))  # [2, 1, 1, 1]
    angle = np.linspace(0, 2 * np.pi, 71, endpoint=False)
    contour = np.stack([32 + 20 * np.cos(angle), 32 + 10 * np.sin(angle), np.zeros(71)], 1).astype(np.float32)
    iris_points = np.array([[32, 32, 0], [36, 32, 0], [32, 28, 0], [28, 32, 0], [32, 36, 0]], np.float32)
    out = {}
    for name, points in (("output_eyes_contours_and_brows", contour), ("output_iris", iris_points)):
        out[name] = _named(ops.add(ops.reshape(zero, np.array([2, 1]), False), points.reshape(1, -1)), name)
    return ov.Model(list(out.values()), [image], "tiny-iris")


def save(model: ov.Model, xml: Path) -> Path:
    """The model as IR: `xml` and its .bin."""
    xml.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(xml), compress_to_fp16=False)
    return xml


def frame(centre: tuple[float, float] | None, side: int = 40, shape: tuple[int, int] = (256, 256)) -> np.ndarray:
    """A black BGR frame with a white square of `side` px centred at `centre` (x, y); None: no square."""
    image = np.zeros((*shape, 3), np.uint8)
    if centre is not None:
        x0, y0 = int(round(centre[0] - side / 2)), int(round(centre[1] - side / 2))
        image[max(y0, 0):max(y0 + side, 0), max(x0, 0):max(x0 + side, 0)] = 255
    return image
