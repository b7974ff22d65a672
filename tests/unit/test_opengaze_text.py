"""The Open Gaze API's text, alone: clients' lines read leniently, the server's written strictly
(tests/test_serve.py checks the same rules on what a running server sends to real clients)."""

from __future__ import annotations

import math
import re

import pytest

from pipeline.serve import opengaze as og
from pipeline.serve.records import (Blink, EyePosition, Fixation, FixationFilter, GazeSample, Pupil, ScreenPoint)

STRICT = re.compile(r'<[A-Z]+(?: [A-Z][A-Z0-9_]*="(?:[!#-%\'-;?-~]|&(?:amp|lt|gt|quot|#[0-9]+);)*")* />\r\n')


@pytest.mark.parametrize("line, expected", [
    ('<SET ID="ENABLE_SEND_DATA" STATE="1" />', ("SET", "ENABLE_SEND_DATA", {"STATE": "1"})),
    ("<set id='enable_send_data' state='1'>", ("SET", "ENABLE_SEND_DATA", {"STATE": "1"})),  # case, quotes, no '/'
    ('<SET ID="USER_DATA" VALUE="trial 1 start"/>', ("SET", "USER_DATA", {"VALUE": "trial 1 start"})),  # ioHub's
    ('<GET ID="CALIBRATE_CLEAR"  />', ("GET", "CALIBRATE_CLEAR", {})),  # ioHub's double space
    ('<SET ID=USER_DATA VALUE=a&amp;b DUR=1', ("SET", "USER_DATA", {"VALUE": "a&b", "DUR": "1"})),  # no quotes, no end
])
def test_lenient_reading(line, expected):
    cmd = og.parse(line)
    assert (cmd.tag, cmd.id, cmd.attrs) == expected


@pytest.mark.parametrize("junk", ["garbage", "", "   ", "ID=\"X\""])
def test_not_an_element(junk):
    assert og.parse(junk) is None


def test_splitter_cuts_at_newlines_and_element_ends_and_keeps_the_rest():
    lines = og.LineSplitter(limit=100)
    assert lines.feed(b'<GET ID="A" /><GET ID="B" />\r\n<GET ID="C"') == ['<GET ID="A" />', '<GET ID="B" />']
    assert lines.feed(b' VALUE="x>y" />') == ['<GET ID="C" VALUE="x>y" />']  # '>' inside quotes is text
    assert lines.feed("<SET ID=\"USER_DATA\" VALUE=\"début\" />\n".encode()) == ['<SET ID="USER_DATA" VALUE="début" />']
    with pytest.raises(OverflowError):
        lines.feed(b"<SET " + b"a" * 200)
    with pytest.raises(og.Unreadable):
        og.LineSplitter().feed(bytes(range(256)))
    with pytest.raises(og.Unreadable):
        og.LineSplitter().feed(b"<GET \x00 />")


def test_values_are_written_for_hand_parsers():
    assert og.number(0.5) == "0.50000" and og.number(-0.000001) == "0.00000" and og.number(math.nan) == "0.00000"
    assert og.integer(10) == "10" and og.integer(0) == "0"
    assert og.text('a b=c&d<e>f"g') == "a&#32;b&#61;c&amp;d&lt;e&gt;f&quot;g"
    assert og.text("début\tend\x01") == "d&#233;but&#9;end"  # ASCII only; XML 1.0 cannot carry \x01
    line = og.ack("USER_DATA", {"VALUE": og.text("trial 1 = start"), "DUR": "0"})
    assert STRICT.fullmatch(line.decode("ascii")) and line.endswith(b" />\r\n")
    assert og.element("REC", None, {}) == b"<REC />\r\n"


def _sample(valid=True):
    p = ScreenPoint(0.25, 0.75, valid)
    return GazeSample(7, 3, 123456789, 1.5, p, Fixation(0.25, 0.75, 1.0, 0.5, 2, valid),
                      (Pupil(0.4, 0.5, 1.0, valid), Pupil(0.6, 0.5, 1.0, valid)),
                      (EyePosition(0.03, 0.01, 0.6, valid), EyePosition(-0.03, 0.01, 0.6, valid)), Blink(0, 0.1, 12))


def test_a_record_lists_the_enabled_groups_in_the_spec_order_user_last():
    fields = og.record_fields(_sample(), "m 1")
    line = og.record(fields, {"USER_DATA", "BLINK", "POG_BEST", "COUNTER", "DIAL", "CURSOR"}).decode("ascii")
    assert STRICT.fullmatch(line)
    names = re.findall(r" ([A-Z0-9_]+)=", line)
    assert names == ["CNT", "BPOGX", "BPOGY", "BPOGV", "BKID", "BKDUR", "BKPMIN", "DIAL", "DIALV", "USER"]
    assert 'DIALV="0"' in line and 'USER="m&#32;1"' in line and 'CNT="7"' in line and 'BPOGX="0.25000"' in line


def test_fixations_are_counted_and_held_through_a_short_gap():
    f, t = FixationFilter(radius=0.05, min_s=0.1), 0.0
    out = []
    for k in range(30):  # 1 s at 30 fps: a fixation, a blink, the same fixation, a saccade, another
        t = k / 30
        x = 0.2 if k < 15 else 0.8
        out.append(f(t, ScreenPoint(x, 0.5, not 8 <= k < 10)))
    ids = [o.id for o in out if o.valid]
    assert ids == sorted(ids) and set(ids) == {1, 2} and not any(o.valid for o in out[:3])  # valid once held 0.1 s
    assert not out[8].valid and out[10].valid and (out[10].id, out[10].start) == (1, 0.0)  # the blink kept fixation 1
    assert out[16].id == 1 and not out[16].valid and out[16].start == 0.5  # the next one: a candidate until held
