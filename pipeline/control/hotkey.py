"""A global pause hotkey on X11 (python-xlib XGrabKey on the root window), polled per frame.

Where it cannot work (no X, Windows/macOS, key already grabbed by another client) it says so once
and the eyes-closed gesture (and the --show window's `p` key) remain.
"""

from __future__ import annotations

import sys


class XHotkey:
    def __init__(self, key: str = "Pause"):
        self.key, self.ok, self.reason = key, False, ""
        self._display = None
        if not sys.platform.startswith("linux"):
            self.reason = "global hotkeys are X11-only"
            return
        try:
            from Xlib import X, XK, display, error

            d = display.Display()
            keysym = XK.string_to_keysym(key)
            keycode = d.keysym_to_keycode(keysym) if keysym else 0
            if not keycode:
                self.reason = f"no key named {key!r} on this keyboard"
                d.close()
                return
            catch = error.CatchError(error.BadAccess)
            root = d.screen().root
            # grab with and without NumLock/CapsLock, which X counts as modifiers
            for mods in (0, X.Mod2Mask, X.LockMask, X.Mod2Mask | X.LockMask):
                root.grab_key(keycode, mods, True, X.GrabModeAsync, X.GrabModeAsync, onerror=catch)
            d.sync()
            if catch.get_error():
                self.reason = f"{key} is already grabbed by another program"
                d.close()
                return
            self._display, self._keycode, self._press = d, keycode, X.KeyPress
            self.ok = True
        except Exception as e:  # no X server, Xlib missing: the hotkey is a convenience
            self.reason = f"{type(e).__name__}: {e}"

    def pressed(self) -> bool:
        """True when the key was pressed since the last call (non-blocking)."""
        if not self.ok:
            return False
        hit = False
        while self._display.pending_events():
            ev = self._display.next_event()
            hit |= ev.type == self._press and ev.detail == self._keycode
        return hit

    def close(self) -> None:
        if self._display is not None:
            self._display.close()
            self._display = None
