"""Loaders for labeled data: AFLW2000-3D head pose, ibug 68-point `.pts`, dlib imglab XML, gaze sessions.

Every loader returns a Dataset: the samples it could read plus the ones it skipped and why
(an image without labels is skipped and counted, never silently dropped). A folder in the wrong
format, or a file that does not parse, is an EdgegazeError naming what was expected and the file.

Head-pose convention (AFLW2000-3D -> edgegaze). `Pose_Para[:3]` are pitch, yaw, roll in radians.
edgegaze uses OMZ head-pose-estimation-adas-0001's signs (pipeline/stages/omz_head_pose.py: yaw > 0
turns the face toward the image right, pitch > 0 tilts it down, roll > 0 rotates it clockwise in
the image). Checked on the 8 shared samples: AFLW yaw is negative when the nose tip lies right of
the eye midpoint in its own 68 landmarks (image00251: -54.7 deg, nose 45 px right), AFLW pitch is
+34 deg on image00430 whose chin points up, and AFLW roll has the sign of the eye line's
clockwise slope (image00251: -14.6 deg, eye line -15 deg). So yaw and pitch are negated and roll
is kept: AFLW_SIGNS, exact for one angle at a time.

The composition differs too: AFLW2000-3D (3DDFA's RotationMatrix) rotates the face by
Rx(pitch) Ry(yaw) Rz(roll) in its y-up frame, i.e. R = Rx(-pitch) Ry(yaw) Rz(roll) in edgegaze's
(x right, y down, z away), while edgegaze composes R = Rz(roll) Ry(-yaw) Rx(pitch)
(mesh_pose.matrix_from_euler). So the label's rotation matrix is built and decomposed in edgegaze's
order (aflw_to_edgegaze); at 55 deg yaw the two readings differ by up to 15 deg in pitch. Checked
on the 8 shared samples: their 68 3-D landmarks (`pt3d_68`, z negated to point away) un-rotated
by this R agree across faces with an RMS spread of 0.05 outer-eye-corner distances, 0.11 with
the order reversed, 0.56 with z kept.
"""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.errors import EdgegazeError
from pipeline.sources import IMAGE_EXTENSIONS

AFLW_SIGNS = {"yaw": -1.0, "pitch": -1.0, "roll": 1.0}  # edgegaze angle = sign * AFLW angle, one at a time
MAX_POSE_DEG = 99.0  # the usual AFLW2000 protocol drops samples with any |angle| beyond this


@dataclass
class PoseSample:
    image: Path
    yaw: float  # degrees, edgegaze (OMZ) convention
    pitch: float
    roll: float
    box: np.ndarray | None = None  # [x0, y0, x1, y1] of the labeled face (its landmarks' extent)


@dataclass
class FaceSample:
    image: Path
    boxes: np.ndarray  # (K, 4) [x0, y0, x1, y1]
    points: list  # per box: (68, 2) landmarks, or None when the box has none
    ignore: np.ndarray = None  # (K,) bool: dlib's ignore='1' boxes (neither hits nor misses)

    def __post_init__(self):
        if self.ignore is None:
            self.ignore = np.zeros(len(self.boxes), bool)


@dataclass
class Dataset:
    name: str
    root: Path
    samples: list
    skipped: list = field(default_factory=list)  # (file name, reason)
    excluded: list = field(default_factory=list)  # (file name, reason): read fine, outside the protocol

    def require(self) -> "Dataset":
        if not self.samples:
            why = f" ({len(self.skipped)} skipped: {self.skipped[0][1]} ...)" if self.skipped else ""
            raise EdgegazeError(f"{self.root}: no usable samples in this {self.name} dataset{why}")
        return self


def _images(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise EdgegazeError(f"dataset folder not found: {folder}" if not folder.exists() else
                            f"{folder} is a file; this dataset is a folder of images with their labels beside them")
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)


def aflw_rotation(pitch: float, yaw: float, roll: float) -> np.ndarray:
    """The face rotation of AFLW2000-3D's Pose_Para (degrees) in edgegaze's camera frame (x right, y down, z away)."""
    from pipeline.stages.mesh_pose import matrix_from_euler

    s = AFLW_SIGNS  # each factor is one edgegaze elementary rotation: Rx(-pitch) Ry(yaw) Rz(roll)
    return (matrix_from_euler(0, s["pitch"] * pitch, 0) @ matrix_from_euler(s["yaw"] * yaw, 0, 0)
            @ matrix_from_euler(0, 0, s["roll"] * roll))


def aflw_to_edgegaze(pitch: float, yaw: float, roll: float) -> tuple[float, float, float]:
    """AFLW2000-3D (pitch, yaw, roll) degrees -> edgegaze (yaw, pitch, roll), same rotation (module docstring)."""
    from pipeline.stages.mesh_pose import euler_from_matrix

    return euler_from_matrix(aflw_rotation(pitch, yaw, roll))


def load_aflw2000(folder, flip: bool = False, max_deg: float = MAX_POSE_DEG) -> Dataset:
    """AFLW2000-3D: `<name>.jpg` beside `<name>.mat` (Pose_Para, pt3d_68).

    flip=True describes the horizontally mirrored images (labels: yaw and roll negated, box
    mirrored): a convention check, the evaluator mirrors the pixels."""
    import scipy.io

    folder = Path(folder)
    images = _images(folder)
    if not images and not any(folder.glob("*.mat")):
        raise EdgegazeError(f"{folder}: expected AFLW2000-3D files (<name>.jpg with <name>.mat holding Pose_Para), "
                            f"found no images and no .mat files")
    ds = Dataset("aflw2000", folder, [])
    for image in images:
        mat = image.with_suffix(".mat")
        if not mat.exists():
            ds.skipped.append((image.name, "no .mat labels"))
            continue
        try:
            m = scipy.io.loadmat(str(mat))
            pitch, yaw, roll = np.degrees(np.asarray(m["Pose_Para"], np.float64).ravel()[:3])
        except KeyError:
            raise EdgegazeError(f"{mat}: expected an AFLW2000-3D .mat with Pose_Para (pitch, yaw, roll "
                                f"radians first); it has {', '.join(k for k in m if not k.startswith('__'))}") from None
        except Exception as e:  # scipy raises several types for a corrupt file
            raise EdgegazeError(f"{mat}: not a readable AFLW2000-3D .mat ({type(e).__name__}: {e})") from None
        if max(abs(pitch), abs(yaw), abs(roll)) > max_deg:
            ds.excluded.append((image.name, f"pose beyond +-{max_deg:g} deg"))
            continue
        box = None
        if "pt3d_68" in m:
            pts = np.asarray(m["pt3d_68"], np.float64)[:2]
            box = np.concatenate([pts.min(1), pts.max(1)])
        s = PoseSample(image, *aflw_to_edgegaze(pitch, yaw, roll), box)
        if flip:
            import cv2

            w = cv2.imread(str(image), cv2.IMREAD_UNCHANGED).shape[1]
            s.yaw, s.roll = -s.yaw, -s.roll
            if box is not None:
                s.box = np.array([w - box[2], box[1], w - box[0], box[3]])
        ds.samples.append(s)
    return ds


def read_pts(path: Path) -> np.ndarray:
    """An ibug `.pts` file: `version: 1`, `n_points: N`, `{`, N lines `x y`, `}` -> (N, 2).
    ibug coordinates are 1-based (Matlab); they are shifted to 0-based pixels here."""
    try:
        lines = [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip()]
        n = int(next(ln for ln in lines if ln.startswith("n_points")).split(":")[1])
        start = lines.index("{") + 1
        pts = np.array([[float(v) for v in ln.split()[:2]] for ln in lines[start:start + n]])
        if pts.shape != (n, 2) or lines[start + n] != "}":
            raise ValueError(f"expected {n} 'x y' lines between braces")
    except (StopIteration, ValueError, IndexError, UnicodeDecodeError) as e:
        raise EdgegazeError(f"{path}: not an ibug .pts file (version, n_points: N, {{ N lines 'x y' }}): {e}") from None
    if n != 68:
        raise EdgegazeError(f"{path}: has {n} points, the ibug scheme has 68")
    return pts - 1.0


def load_ibug68(folder) -> Dataset:
    """300-W / ibug style: every image with a `.pts` file of the same stem beside it (one face).
    The face box is the landmarks' extent."""
    folder = Path(folder)
    images = _images(folder)
    if not images:
        raise EdgegazeError(f"{folder}: expected images with 68-point .pts files beside them, found no images")
    ds = Dataset("ibug68", folder, [])
    for image in images:
        pts_file = image.with_suffix(".pts")
        if not pts_file.exists():
            ds.skipped.append((image.name, "no .pts labels"))
            continue
        pts = read_pts(pts_file)
        box = np.concatenate([pts.min(0), pts.max(0)])[None]
        ds.samples.append(FaceSample(image, box, [pts]))
    return ds


def load_dlib_xml(path) -> Dataset:
    """dlib imglab XML: <image file=...><box top left width height [ignore='1']><part name x y/>...
    Boxes without 68 parts have points None (fine for face detection, skipped for landmarks).
    Image paths are relative to the XML file."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p.name for p in path.glob("*.xml"))
        raise EdgegazeError(f"{path} is a folder: --dataset dlib-xml takes an imglab XML file"
                            + (f" (here: {', '.join(found)})" if found else
                               "; for a folder of images with ibug .pts files use --dataset ibug68"))
    if not path.exists():
        raise EdgegazeError(f"dlib XML file not found: {path}")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise EdgegazeError(f"{path}: not XML ({e})") from None
    entries = root.findall("./images/image")
    if root.tag != "dataset" or (not entries and root.find("images") is None):
        raise EdgegazeError(f"{path}: expected a dlib imglab XML (<dataset><images><image file=...><box .../>)")
    ds = Dataset("dlib-xml", path, [])
    for entry in entries:
        image = path.parent / entry.get("file", "")
        if not entry.get("file") or not image.exists():
            ds.skipped.append((entry.get("file", "?"), "image file missing"))
            continue
        boxes, points, ignore = [], [], []
        for b in entry.findall("box"):
            try:
                x, y, w, h = (float(b.get(k)) for k in ("left", "top", "width", "height"))
                parts = {int(p.get("name")): (float(p.get("x")), float(p.get("y"))) for p in b.findall("part")}
            except (TypeError, ValueError) as e:
                raise EdgegazeError(f"{path}: bad <box> or <part> in image {entry.get('file')} ({e})") from None
            boxes.append([x, y, x + w, y + h])
            # dlib marks parts it could not place with (-1, -1); treat such a box as unlabeled
            ok = sorted(parts) == list(range(68)) and min(min(v) for v in parts.values()) >= 0
            points.append(np.array([parts[i] for i in range(68)]) if ok else None)
            ignore.append(b.get("ignore", "0") == "1")
        if not boxes:
            ds.skipped.append((entry.get("file"), "no face boxes"))
            continue
        ds.samples.append(FaceSample(image, np.array(boxes, np.float64).reshape(-1, 4), points, np.array(ignore)))
    return ds


@dataclass
class Session:
    root: Path
    video: Path | None  # None for a folder of stills
    targets: dict  # frame (or still) index -> (x_px, y_px)
    screen: dict  # width_px, height_px, width_mm, height_mm, distance_mm (None when not given)
    images: list | None = None  # stills: one image per index, in targets.csv order

    @property
    def stills(self) -> bool:
        return self.images is not None


def load_session(folder, video: str | Path | None = None) -> Session:
    """A gaze session folder: `screen.json`, and either a recording with `targets.csv`
    (frame,x_px,y_px) and the video (`video.mp4` in the folder, or `session.json` {"video": path
    relative to the folder} so a session can refer to a recording kept elsewhere; `video` overrides
    both), or stills with `targets.csv` (image,x_px,y_px), image paths relative to the folder."""
    from pipeline.control.calibration import check_targets_on_screen, read_screen, read_targets_csv

    folder = Path(folder)
    if not folder.is_dir():  # a file (the session's video, say) was 'folder not found'
        raise EdgegazeError(f"gaze session folder not found: {folder}" if not folder.exists() else
                            f"{folder} is a file; a gaze session is a folder with screen.json and targets.csv")
    for name in ("targets.csv", "screen.json"):
        if not (folder / name).exists():
            raise EdgegazeError(f"{folder}: a gaze session needs targets.csv and screen.json, and video.mp4 (or "
                                f"session.json with 'video') unless targets.csv lists stills; {name} is missing")
    screen = read_screen(folder / "screen.json")
    images = _stills(folder)
    if images is not None:
        targets = {i: xy for i, (_, xy) in enumerate(images)}
        check_targets_on_screen(targets, screen["width_px"], screen["height_px"], folder / "targets.csv")
        return Session(folder, None, targets, screen, [p for p, _ in images])
    if video is None:
        meta = folder / "session.json"
        if meta.exists():
            try:
                video = folder / json.loads(meta.read_text())["video"]
            except (KeyError, TypeError, ValueError, OSError) as e:  # also a folder, or not UTF-8
                raise EdgegazeError(f"{meta}: expected JSON {{\"video\": \"path relative to the session\"}} "
                                    f"({type(e).__name__}: {e})") from None
        else:
            video = folder / "video.mp4"
    video = Path(video).resolve()
    if not video.exists():
        raise EdgegazeError(f"{folder}: session video not found: {video}")
    targets = read_targets_csv(folder / "targets.csv")
    check_targets_on_screen(targets, screen["width_px"], screen["height_px"], folder / "targets.csv")
    return Session(folder, video, targets, screen)


def _stills(folder: Path) -> list | None:
    """[(image path, (x, y))] when targets.csv has an `image` column, else None."""
    path = folder / "targets.csv"
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:  # Excel's "CSV UTF-8" starts with a BOM
            reader = csv.DictReader(f)
            if "image" not in (reader.fieldnames or []):
                return None
            rows = [(folder / r["image"], (float(r["x_px"]), float(r["y_px"]))) for r in reader]
    except OSError as e:  # a folder, no permission
        raise EdgegazeError(f"cannot read {path} ({e.strerror}); targets.csv must be a CSV file") from None
    except (KeyError, TypeError, ValueError) as e:  # also not UTF-8
        raise EdgegazeError(f"{path}: expected CSV columns frame,x_px,y_px or image,x_px,y_px "
                            f"({type(e).__name__}: {e})") from None
    missing = [str(p) for p, _ in rows if not p.exists()]
    if missing:
        raise EdgegazeError(f"{path}: {len(missing)} image(s) not found, e.g. {missing[0]}")
    if not rows:
        raise EdgegazeError(f"{path} lists no stills")
    return rows
