"""The user's own mouse clicks, heard on X11 (`--hand-clicks`): the X RECORD extension delivers
every button press on the display to a listener thread, with the pointer's screen position, and
interferes with nothing (no grab). Windows, macOS and Wayland sessions give a program no such
stream without an OS hook edgegaze does not install: there the option says why in one line and
the app's own clicks still teach the calibration.
"""

from __future__ import annotations

import queue
import sys
import threading


class XClicks:
    """Button-1 presses anywhere on the X display, `poll()`ed per frame; `ok` False with `reason`
    where they cannot be heard."""

    def __init__(self):
        self.ok, self.reason = False, ""
        self._queue: queue.Queue = queue.Queue()
        if not sys.platform.startswith("linux"):
            self.reason = "hand clicks are heard on X11 only (this is not Linux)"
            return
        try:
            self._start()
            self.ok = True
        except Exception as e:  # no X server, no RECORD extension, Xlib missing: the option is a convenience
            self.reason = f"{type(e).__name__}: {e}"

    def _start(self) -> None:
        from Xlib import X, display
        from Xlib.ext import record
        from Xlib.protocol import rq

        self._ctrl, self._data = display.Display(), display.Display()
        if not self._ctrl.has_extension("RECORD"):
            raise RuntimeError("the X server has no RECORD extension")
        self._ctx = self._ctrl.record_create_context(0, [record.AllClients], [{
            "core_requests": (0, 0), "core_replies": (0, 0), "ext_requests": (0, 0, 0, 0),
            "ext_replies": (0, 0, 0, 0), "delivered_events": (0, 0), "device_events": (X.ButtonPress, X.ButtonPress),
            "errors": (0, 0), "client_started": False, "client_died": False}])
        self._ctrl.sync()  # the context must exist before the other connection enables it

        def heard(reply):
            if reply.category != record.FromServer or reply.client_swapped:
                return
            data = reply.data
            while len(data):
                event, data = rq.EventField(None).parse_binary_value(data, self._data.display, None, None)
                if event.type == X.ButtonPress and event.detail == 1:
                    self._queue.put((float(event.root_x), float(event.root_y)))

        self._thread = threading.Thread(target=self._data.record_enable_context, args=(self._ctx, heard),
                                        name="edgegaze-hand-clicks", daemon=True)
        self._thread.start()

    def poll(self) -> list[tuple[float, float]]:
        """The presses heard since the last call (screen px), oldest first."""
        out = []
        while not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out

    def close(self) -> None:
        if not self.ok:
            return
        self.ok = False
        try:
            self._ctrl.record_disable_context(self._ctx)
            self._ctrl.sync()
            self._thread.join(2.0)
            self._ctrl.record_free_context(self._ctx)
            self._ctrl.close()
        except Exception:  # the display went away first: nothing left to release
            pass
