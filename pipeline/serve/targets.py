"""What the server shows: the calibration targets when a client asks it to draw them
(CALIBRATE_SHOW 1): the gaze mouse's calibration screen (control/ui.py) on a thread of its own,
since Tk keeps to the thread that made it. Without a display it draws nothing and says so once."""

from __future__ import annotations

import queue
import threading

from pipeline.control import ui

FALLBACK_SCREEN = (1920, 1080)


def display_size(log=print) -> tuple[int, int]:
    """The display's size in pixels, or FALLBACK_SCREEN (said) where there is none."""
    if ui.has_display():
        try:
            import tkinter

            root = tkinter.Tk()
            size = (root.winfo_screenwidth(), root.winfo_screenheight())
            root.destroy()
            return size
        except Exception as e:  # noqa: BLE001 - no Tk, or a display that does not answer
            log(f"cannot read the display's size ({type(e).__name__}: {e})")
    log(f"screen size {FALLBACK_SCREEN[0]}x{FALLBACK_SCREEN[1]} assumed (no display); clients may set SCREEN_SIZE, "
        "or give --screen-size")
    return FALLBACK_SCREEN


class TargetWindow:
    """Full-screen targets, one at a time: show(x, y) in fractions of the screen, hide(), close()."""

    def __init__(self, size: tuple[int, int], log=print):
        self.size, self.log = size, log
        self._todo: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._failed = not ui.has_display()

    @property
    def available(self) -> bool:
        return not self._failed

    def show(self, x: float, y: float) -> None:
        self._start()
        self._todo.put((x * self.size[0], y * self.size[1]))

    def hide(self) -> None:
        if self._thread is not None:
            self._todo.put(None)

    def close(self) -> None:
        self.hide()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _start(self) -> None:
        if self._thread is None and not self._failed:
            self._thread = threading.Thread(target=self._run, name="edgegaze-targets", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            screen = ui.CalibrationScreen(*self.size)
        except Exception as e:  # noqa: BLE001 - a display that refuses, no tkinter: said once, nothing drawn
            self._failed = True
            self.log(f"cannot draw calibration targets ({' '.join(str(e).split())}); the client must draw them")
            return
        try:
            while True:
                try:
                    item = self._todo.get(timeout=0.02)
                except queue.Empty:
                    screen.update()
                    continue
                if item is None:
                    break
                screen.show(*item)
        finally:
            screen.close()
            self._thread = None
