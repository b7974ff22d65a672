"""MediaPipe's own legacy FaceMesh with iris (refine_landmarks=True, tracking mode), as a peer.

Runs inside its own virtual environment (mediapipe==0.10.14 pins numpy<2, so it never becomes
an edgegaze dependency). Protocol on stdin/stdout, one line each, so the parent can interleave
blocks of frames, unpaced and paced, with its own configurations:
    parent: "block START END"        -> worker: {"seconds": s, "cpu_seconds": c, "frames": n, "found": k,
                                                 "voluntary": v, "involuntary": i}
    parent: "paced START END FPS"    -> worker: the same keys for frames fed at FPS, and "latency_ms": [...]
    parent: "quit"
CPU seconds and context switches are this worker's own process (all its threads), measured as
the parent measures its contenders (benchmarks/_cost.py, shared).
"""

import json
import sys
from pathlib import Path

import cv2
import mediapipe as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _cost import Clock, paced_block  # noqa: E402


def main() -> None:
    video, count = sys.argv[1], int(sys.argv[2])
    cap = cv2.VideoCapture(video)
    frames = []
    while len(frames) < count:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))  # MediaPipe takes RGB; decode excluded
    mesh = mp.solutions.face_mesh.FaceMesh(static_image_mode=False, max_num_faces=1, refine_landmarks=True,
                                           min_detection_confidence=0.5, min_tracking_confidence=0.5)
    mesh.process(frames[0])  # warm-up
    print(json.dumps({"ready": len(frames), "mediapipe": mp.__version__}), flush=True)
    for line in sys.stdin:
        parts = line.split()
        if not parts or parts[0] == "quit":
            break
        start, end = int(parts[1]), int(parts[2])
        if parts[0] == "paced":
            print(json.dumps(paced_block(lambda fs: map(mesh.process, fs), frames[start:end], float(parts[3]))),
                  flush=True)
            continue
        found, clock = 0, Clock()

        def block():
            nonlocal found
            for frame in frames[start:end]:
                found += mesh.process(frame).multi_face_landmarks is not None
            return end - start

        clock.time(block)
        print(json.dumps({"seconds": clock.wall, "cpu_seconds": clock.cpu, "frames": clock.frames, "found": found,
                          "voluntary": clock.voluntary, "involuntary": clock.involuntary}), flush=True)


if __name__ == "__main__":
    main()
