"""The user's own mouse clicks, heard on X11 (`--hand-clicks`): the X RECORD extension delivers
every button press on the display to a listener thread, with the pointer's screen position, and
interferes with nothing (no grab). Windows and macOS give a program no such stream without an OS
hook edgegaze does not install: there the option says why in one line and the app's own clicks
still teach the calibration. A Wayland session's X server is XWayland, which sees only the presses
in X11 windows, not those in native Wayland windows: there the option works and says so in one line.
"""

from __future__ import annotations

import os
import queue
import sys
import threading

WAYLAND_NOTE = ("this is a Wayland session: hand clicks are heard only in X11 (XWayland) windows, not in native "
                "Wayland ones")


def wayland_session(env=os.environ) -> bool:
    """A Wayland session (XDG_SESSION_TYPE says so, or WAYLAND_DISPLAY is set in a session not called
    X11), whose X server, if any, is XWayland."""
    kind = env.get("XDG_SESSION_TYPE", "").lower()
    return kind == "wayland" or (bool(env.get("WAYLAND_DISPLAY")) and kind != "x11")


class XClicks:
    """Button-1 presses anywhere on the X display, `poll()`ed per frame; `ok` False with `reason`
    where they cannot be heard; `note`, where they are heard only in part (a Wayland session)."""

    def __init__(self):
        self.ok, self.reason = False, ""
        self.note = WAYLAND_NOTE if sys.platform.startswith("linux") and wayland_session() else ""
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
