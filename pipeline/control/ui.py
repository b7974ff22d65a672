"""What the gaze mouse shows: the full-screen calibration targets (Tk) and the --show overlay
(OpenCV window). Both need a display; neither is imported before it is used."""

from __future__ import annotations

import os
import sys

from pipeline.errors import EdgegazeError


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY")) or not sys.platform.startswith("linux")


class CalibrationScreen:
    """A full-screen black window with one target (a ring and a red dot) at a time."""

    def __init__(self, width: int, height: int):
        try:
            import tkinter as tk
        except ImportError:
            raise EdgegazeError("live calibration needs tkinter (Debian: apt install python3-tk); "
                                "or calibrate from a recorded session (--calibrate-from)") from None
        self.root = tk.Tk()
        self.root.title("edgegaze calibration")
        self.root.geometry(f"{width}x{height}+0+0")
        self.root.attributes("-fullscreen", True)
        self.canvas = tk.Canvas(self.root, width=width, height=height, bg="black", highlightthickness=0)
        self.canvas.pack()

    def show(self, x: float, y: float) -> None:
        self.canvas.delete("all")
        self.canvas.create_oval(x - 18, y - 18, x + 18, y + 18, outline="white", width=3)
        self.canvas.create_oval(x - 4, y - 4, x + 4, y + 4, fill="red", outline="")
        self.root.update()

    def update(self) -> None:
        self.root.update()

    def close(self) -> None:
        self.root.destroy()


class Overlay:
    """--show: the camera view with the face drawing and the pointer state; `p` pauses, `q` quits."""

    def __init__(self):
        import cv2

        if not has_display():
            raise EdgegazeError("--show needs a display (set DISPLAY or run without --show)")
        self.cv2 = cv2
        try:
            cv2.namedWindow("edgegaze mouse")
        except cv2.error:
            raise EdgegazeError("--show needs OpenCV with GUI support (pip install opencv-python "
                                "instead of opencv-python-headless); run without --show") from None

    def __call__(self, fr, d, controller) -> bool:
        from pipeline.draw import annotate

        cv2 = self.cv2
        image = annotate(fr.image, fr)
        text = f"{d.state}  pointer {int(d.xy[0])},{int(d.xy[1])}" + (f"  click:{d.click}" if d.click else "")
        cv2.putText(image, text, (10, image.shape[0] - 15), cv2.FONT_HERSHEY_SIMPLEX, 0.7, (0, 255, 255), 2)
        s = controller.backend.screen  # the pointer on a mini screen in the corner
        mw, mh = 160, int(160 * s.height / s.width)
        cv2.rectangle(image, (5, 60), (5 + mw, 60 + mh), (255, 255, 255), 1)
        cv2.circle(image, (5 + int(d.xy[0] * mw / s.width), 60 + int(d.xy[1] * mh / s.height)), 4, (0, 0, 255), -1)
        cv2.imshow("edgegaze mouse", image)
        key = cv2.waitKey(1) & 0xFF
        if key == ord("p"):
            controller.toggle_pause()
        return key in (27, ord("q"))

    def close(self) -> None:
        self.cv2.destroyAllWindows()
