"""What the gaze mouse shows: the full-screen calibration targets and pointing test (Tk), zoom-to-
click's magnifier (Tk, showing a screenshot) and the --show overlay (OpenCV window). Each needs a
display; none is imported before it is used."""

from __future__ import annotations

import os
import sys

from pipeline.errors import EdgegazeError


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY")) or not sys.platform.startswith("linux")


def _tk(what: str):
    try:
        import tkinter as tk
    except ImportError:
        raise EdgegazeError(f"{what} needs tkinter (Debian: apt install python3-tk)") from None
    return tk


def full_screen(tk, width: int, height: int, title: str, bg: str = "black"):
    """A full-screen Tk window with one canvas: (root, canvas)."""
    root = tk.Tk()
    root.title(title)
    root.geometry(f"{width}x{height}+0+0")
    root.attributes("-fullscreen", True)
    canvas = tk.Canvas(root, width=width, height=height, bg=bg, highlightthickness=0)
    canvas.pack()
    return root, canvas


class CalibrationScreen:
    """A full-screen black window with one target (a ring and a red dot) at a time."""

    def __init__(self, width: int, height: int):
        tk = _tk("live calibration (or calibrate from a recorded session: --calibrate-from)")
        self.root, self.canvas = full_screen(tk, width, height, "edgegaze calibration")

    def show(self, x: float, y: float) -> None:
        self.canvas.delete("all")
        self.canvas.create_oval(x - 18, y - 18, x + 18, y + 18, outline="white", width=3)
        self.canvas.create_oval(x - 4, y - 4, x + 4, y + 4, fill="red", outline="")
        self.root.update()

    def update(self) -> None:
        self.root.update()

    def close(self) -> None:
        self.root.destroy()


class PointingScreen:
    """The pointing test's full-screen window: the condition's ring of targets in grey, the one to
    select next in blue; closing it (or Escape) ends the test."""

    def __init__(self, width: int, height: int):
        tk = _tk("the pointing test")
        self.root, self.canvas = full_screen(tk, width, height, "edgegaze pointing test", bg="white")
        self.closed = False
        self.root.protocol("WM_DELETE_WINDOW", self.close)
        self.root.bind("<Escape>", lambda _: self.close())
        self._shown = None

    def show(self, condition, index: int, done: int, total: int) -> None:
        if self.closed or (condition, index) == self._shown:
            return self.update()
        self._shown = (condition, index)
        self.root.title(f"edgegaze pointing test {done}/{total}")
        c = self.canvas
        c.delete("all")
        r = condition.width / 2
        for k, (x, y) in enumerate(condition.centres):
            c.create_oval(x - r, y - r, x + r, y + r, fill="#1f6fd1" if k == index else "#d8d8d8", outline="")
        c.create_text(12, 12, anchor="nw", fill="#555", text=f"{done} / {total}   W {condition.width:g} px, "
                      f"D {condition.distance:g} px   (Esc: stop)")
        self.update()

    def update(self) -> None:
        if not self.closed:
            try:
                self.root.update()
            except Exception:  # the window manager destroyed the window
                self.closed = True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.root.destroy()


class Magnifier:
    """Zoom-to-click's view: a borderless window over the lens's place showing a screenshot of its
    region enlarged (zoom.Lens); the view zoom.ZoomToClick opens, updates and closes."""

    def __init__(self):
        self.tk = _tk("zoom-to-click")
        self.window = None
        self._root = None

    def _parent(self):
        """The app's Tk root (the pointing test's window) or a hidden one of its own."""
        if self.tk._default_root is None:
            self._root = self.tk.Tk()
            self._root.withdraw()
        return self.tk._default_root

    def open(self, lens) -> None:
        from PIL import Image, ImageGrab, ImageTk

        self.close()
        (wx, wy, ww, wh), (rx, ry, rw, rh) = lens.window, lens.region
        shot = ImageGrab.grab(bbox=(round(rx), round(ry), round(rx + rw), round(ry + rh)))
        image = shot.resize((round(ww), round(wh)), Image.Resampling.BICUBIC)
        self.window = self.tk.Toplevel(self._parent())
        self.window.overrideredirect(True)
        self.window.attributes("-topmost", True)
        self.window.geometry(f"{round(ww)}x{round(wh)}+{round(wx)}+{round(wy)}")
        self._photo = ImageTk.PhotoImage(image, master=self.window)
        self.tk.Label(self.window, image=self._photo, borderwidth=0, highlightthickness=0).pack()
        self.window.update()

    def update(self) -> None:
        if self.window is not None:
            self.window.update()

    def close(self) -> None:
        if self.window is not None:
            self.window.destroy()
            self.window = None
            self.tk._default_root.update()  # unmapped now, so a click reaches what it covered


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
