"""Gazepoint's Open Gaze API (API 2.x) as text: what clients send, read leniently, and what the
server sends, written strictly.

Clients in the wild parse the server's lines by hand (PsychoPy ioHub splits a record on spaces and
on '=', and reads a number with a leading 0 as octal; PyGaze's reader thread dies on an empty
line), so every line written here is one XML element `<TAG NAME="value" ... />` ended by `\\r\\n`:
ASCII only, floats as `%.5f`, integers without leading zeros, and no space, `=`, `&`, `<`, `>` or
`"` inside a value (text is written as XML character references: `&#32;` for a space). Nothing
else is ever written: no blank keep-alive line.

What clients send is read as they send it: any case, spacing or quoting, with or without `/>` or
`\\r\\n` (`LineSplitter` cuts the byte stream at a newline or at a `>` outside quotes).

A REC record carries the fields of the groups a client enabled (ENABLE_SEND_*), in the spec's
order with USER last (`RECORD_GROUPS`). edgegaze acknowledges every group, including the ones it
has no data for: those with a validity flag in the spec are sent with it 0, those without one
(cursor, keyboard, heart-rate pulse and interbeat interval) are not sent at all (`NOT_SENT`).
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field

# ENABLE_SEND_<group> -> the REC fields it adds, in the spec's order (Open Gaze API 2.x, section 5)
RECORD_GROUPS = {
    "COUNTER": ("CNT",),
    "TIME": ("TIME",),
    "TIME_TICK": ("TIME_TICK",),
    "POG_FIX": ("FPOGX", "FPOGY", "FPOGS", "FPOGD", "FPOGID", "FPOGV"),
    "POG_LEFT": ("LPOGX", "LPOGY", "LPOGV"),
    "POG_RIGHT": ("RPOGX", "RPOGY", "RPOGV"),
    "POG_BEST": ("BPOGX", "BPOGY", "BPOGV"),
    "POG_AAC": ("APOGX", "APOGY", "APOGV"),
    "PUPIL_LEFT": ("LPCX", "LPCY", "LPD", "LPS", "LPV"),
    "PUPIL_RIGHT": ("RPCX", "RPCY", "RPD", "RPS", "RPV"),
    "EYE_LEFT": ("LEYEX", "LEYEY", "LEYEZ", "LPUPILD", "LPUPILV"),
    "EYE_RIGHT": ("REYEX", "REYEY", "REYEZ", "RPUPILD", "RPUPILV"),
    "CURSOR": ("CX", "CY", "CS"),
    "KB": ("KB", "KBS"),
    "BLINK": ("BKID", "BKDUR", "BKPMIN"),
    "PUPILMM": ("LPMM", "LPMMV", "RPMM", "RPMMV"),
    "DIAL": ("DIAL", "DIALV"),
    "GSR": ("GSR", "GSRV"),
    "HR": ("HR", "HRV"),
    "HR_PULSE": ("HRP",),
    "HR_IBI": ("HRIBI",),
    "TTL": ("TTL0", "TTL1", "TTLV"),
    "PIX": ("PIXX", "PIXY", "PIXS", "PIXV"),
    "USER_DATA": ("USER",),
}
# groups edgegaze has no data for: sent with their validity flag 0, or (no flag in the spec) not at all
INVALID = ("POG_AAC", "PUPILMM", "DIAL", "GSR", "HR", "TTL", "PIX")
NOT_SENT = ("CURSOR", "KB", "HR_PULSE", "HR_IBI")
ENABLE_IDS = {f"ENABLE_SEND_{group}": group for group in RECORD_GROUPS}

_UNIT_END = re.compile(r'["\n>]')
_ELEMENT = re.compile(r"^<\s*([A-Za-z_][\w-]*)(.*?)(?:/\s*)?>?$", re.S)
_ATTRIBUTE = re.compile(r"""([A-Za-z_][\w.-]*)\s*=\s*(?:"([^"]*)"?|'([^']*)'?|([^\s"'/>]+))""")
_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", " ": "&#32;", "=": "&#61;"}


@dataclass(frozen=True)
class Command:
    """One element a client sent: `tag` (SET, GET, ... upper case), `id` (its ID, upper case; ''
    when it has none) and the other attributes (names upper case, values unescaped)."""

    tag: str
    id: str
    attrs: dict[str, str] = field(default_factory=dict)


class Unreadable(ValueError):
    """Bytes that are not Open Gaze API text at all (binary data): the client is closed."""


def parse(unit: str) -> Command | None:
    """A client's element, read leniently; None when it is no element at all (malformed)."""
    m = _ELEMENT.match(unit.strip())
    if not m:
        return None
    attrs = {}
    for a in _ATTRIBUTE.finditer(m.group(2)):
        value = next(v for v in a.groups()[1:] if v is not None)
        attrs[a.group(1).upper()] = html.unescape(value)
    return Command(m.group(1).upper(), attrs.pop("ID", "").strip().upper(), attrs)


class LineSplitter:
    """Cuts a client's byte stream into elements: at a newline, or at a `>` outside double quotes
    (a client that never sends `\\r\\n`). UTF-8 text is read (a marker may carry any letter); bytes
    that do not decode, or control characters other than tab, CR and LF, raise Unreadable, and a
    pending element over `limit` characters raises OverflowError."""

    def __init__(self, limit: int = 65536):
        import codecs

        self.limit, self._pending, self._scanned, self._quoted = limit, "", 0, False
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")

    def feed(self, data: bytes) -> list[str]:
        try:
            text = self._decoder.decode(data)
        except UnicodeDecodeError:
            raise Unreadable("bytes that are not UTF-8 text") from None
        if any(ord(c) < 32 and c not in "\t\r\n" for c in text):
            raise Unreadable("control characters")
        self._pending += text
        units, start = [], 0
        for m in _UNIT_END.finditer(self._pending, self._scanned):
            if m.group() == '"':
                self._quoted = not self._quoted
            elif m.group() == "\n" or not self._quoted:
                units.append(self._pending[start:m.end()])
                start, self._quoted = m.end(), False
        self._pending, self._scanned = self._pending[start:], len(self._pending) - start
        if len(self._pending) > self.limit:
            raise OverflowError(f"a line over {self.limit} characters")
        return [u for u in (u.strip() for u in units) if u]


def number(value: float) -> str:
    """A float as the spec writes it: %.5f, never -0.00000, NaN or inf (0.00000 then)."""
    if not math.isfinite(value):
        return "0.00000"
    text = f"{value:.5f}"
    return "0.00000" if text == "-0.00000" else text


def integer(value: int) -> str:
    return str(int(value))


def text(value: str) -> str:
    """Any text as a value clients split by hand: ASCII, with no space, '=', '&', '<', '>' or '"' in
    it (XML character references instead, which an XML parser reads back); control characters
    that XML 1.0 cannot carry are dropped."""
    out = []
    for c in str(value):
        code = ord(c)
        if c in _SPECIAL:
            out.append(_SPECIAL[c])
        elif 32 < code < 127:
            out.append(c)
        elif code >= 127 or c in "\t\n\r":
            out.append(f"&#{code};")
    return "".join(out)


def element(tag: str, id: str | None = None, attrs: dict[str, str] | None = None) -> bytes:
    """One line the server sends: `<TAG ID="..." NAME="value" ... />\\r\\n`, values already
    formatted (number, integer, text)."""
    items = ([("ID", text(id))] if id is not None else []) + list((attrs or {}).items())
    body = " ".join(f'{name}="{value}"' for name, value in items)
    return f"<{tag} {body} />\r\n".encode("ascii") if body else f"<{tag} />\r\n".encode("ascii")


def ack(id: str, attrs: dict[str, str] | None = None) -> bytes:
    return element("ACK", id, attrs)


def nack(id: str) -> bytes:
    return element("NACK", id)


def points(xy) -> dict[str, str]:
    """A calibration point list as the CALIBRATE_ADDPOINT ACK lists it: PTS, then X1 Y1 X2 Y2 ..."""
    out = {"PTS": integer(len(xy))}
    for k, (x, y) in enumerate(xy, 1):
        out[f"X{k}"], out[f"Y{k}"] = number(x), number(y)
    return out


def _flag(valid: bool) -> str:
    return "1" if valid else "0"


def _invalid(names) -> dict[str, str]:
    """A group edgegaze has no data for: its validity flag 0, its values 0."""
    return {n: "0" if n.endswith("V") or n.startswith("TTL") else "0.00000" for n in names}


_INVALID_FIELDS = {group: _invalid(RECORD_GROUPS[group]) for group in INVALID}


def record_fields(sample, user: str) -> dict[str, dict[str, str]]:
    """Every group's REC fields for one GazeSample (records.py), formatted; `user`: the USER_DATA
    value this record carries. Groups in NOT_SENT have none."""
    n, i, s = number, integer, sample
    b, f, k = s.best, s.fixation, s.blink
    out = {"COUNTER": {"CNT": i(s.counter)}, "TIME": {"TIME": n(s.time)}, "TIME_TICK": {"TIME_TICK": i(s.tick)},
           "POG_FIX": {"FPOGX": n(f.x), "FPOGY": n(f.y), "FPOGS": n(f.start), "FPOGD": n(f.duration),
                       "FPOGID": i(f.id), "FPOGV": _flag(f.valid)}}
    for side, letter in (("left", "L"), ("right", "R")):
        p = getattr(s, side)
        out[f"POG_{side.upper()}"] = {f"{letter}POGX": n(p.x), f"{letter}POGY": n(p.y), f"{letter}POGV": _flag(p.valid)}
    out["POG_BEST"] = {"BPOGX": n(b.x), "BPOGY": n(b.y), "BPOGV": _flag(b.valid)}
    for (side, letter), pupil, eye in zip((("LEFT", "L"), ("RIGHT", "R")), s.pupils, s.eyes):
        out[f"PUPIL_{side}"] = {f"{letter}PCX": n(pupil.x), f"{letter}PCY": n(pupil.y), f"{letter}PD": n(0.0),
                                f"{letter}PS": n(pupil.scale), f"{letter}PV": _flag(pupil.valid)}
        out[f"EYE_{side}"] = {f"{letter}EYEX": n(eye.x), f"{letter}EYEY": n(eye.y), f"{letter}EYEZ": n(eye.z),
                              f"{letter}PUPILD": n(0.0), f"{letter}PUPILV": _flag(eye.valid)}
    out["BLINK"] = {"BKID": i(k.id), "BKDUR": n(k.duration), "BKPMIN": i(k.per_minute)}
    out["USER_DATA"] = {"USER": text(user)}
    return {**out, **_INVALID_FIELDS}


def record(fields: dict[str, dict[str, str]], groups) -> bytes:
    """A REC line with the fields of `groups` (enabled ENABLE_SEND_* groups), in the spec's order."""
    return element("REC", None, {k: v for g in RECORD_GROUPS if g in groups and g in fields for k, v in fields[g].items()})
