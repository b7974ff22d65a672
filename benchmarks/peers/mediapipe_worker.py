"""MediaPipe's own legacy FaceMesh with iris (refine_landmarks=True, tracking mode), as a peer.

Runs inside its own virtual environment (mediapipe==0.10.14 pins numpy<2, so it never becomes
an edgegaze dependency). Protocol on stdin/stdout, one line each, so the parent can interleave
blocks of frames with its own configurations:
    parent: "block START END"  -> worker: {"seconds": s, "frames": n, "found": k}
    parent: "quit"
"""

import json
import sys
import time

import cv2
import mediapipe as mp


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
        found = 0
        t = time.perf_counter()
        for frame in frames[start:end]:
            found += mesh.process(frame).multi_face_landmarks is not None
        print(json.dumps({"seconds": time.perf_counter() - t, "frames": end - start, "found": found}), flush=True)


if __name__ == "__main__":
    main()
