"""MediaPipe's own legacy FaceMesh with iris (refine_landmarks=True, tracking mode), as a peer.

Runs inside its own virtual environment (mediapipe==0.10.14 pins numpy<2, so it never becomes
an edgegaze dependency). Protocol on stdin/stdout, one line each, so the parent can interleave
blocks of frames with its own configurations:
    parent: "block START END"  -> worker: {"seconds": s, "cpu_seconds": c, "frames": n, "found": k}
    parent: "paced COUNT FPS"  -> worker: {"core_share_at_fps": .., "latency_p50_ms": .., ...}
    parent: "quit"
CPU seconds are this worker's own process CPU time, measured as the parent measures its contenders
(benchmarks/_cost.py, shared).
"""

import json
import sys
import time
from pathlib import Path

import cv2
import mediapipe as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _cost import paced  # noqa: E402


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
        if parts[0] == "paced":
            reply = paced(lambda fs: map(mesh.process, fs), frames[:int(parts[1])], float(parts[2]))
            print(json.dumps(reply), flush=True)
            continue
        start, end = int(parts[1]), int(parts[2])
        found = 0
        t, cpu = time.perf_counter(), time.process_time()
        for frame in frames[start:end]:
            found += mesh.process(frame).multi_face_landmarks is not None
        print(json.dumps({"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - cpu,
                          "frames": end - start, "found": found}), flush=True)


if __name__ == "__main__":
    main()
