"""How a camera URL is named: credentials never shown, a file name from its host and path, bad URLs refused."""

from __future__ import annotations

import pytest

from pipeline.cameras import check_url, is_url, label, shown
from pipeline.errors import InputError


@pytest.mark.parametrize("url, want", [
    ("rtsp://admin:hunter2@10.0.0.5:554/Streaming/Channels/101", "rtsp://***@10.0.0.5:554/Streaming/Channels/101"),
    ("http://user@cam.local/video.mjpg", "http://***@cam.local/video.mjpg"),
    ("rtsp://u:p/a@ss@cam/live", "rtsp://***@cam/live"),  # an unescaped '/' or '@' in the password
    ("http://cam/videostream.cgi?user=admin&pwd=hunter2&res=1", "http://cam/videostream.cgi?user=***&pwd=***&res=1"),
    ("https://cam/live?token=abc#frag", "https://cam/live?token=***#frag"),
    ("rtsp://cam:8554/live", "rtsp://cam:8554/live"),
    ("0", "0"),
    ("videos/a@b.mp4", "videos/a@b.mp4"),
])
def test_shown_masks_credentials_and_nothing_else(url, want):
    assert shown(url) == want


def test_shown_masks_every_url_in_a_message():
    text = "cannot open camera rtsp://a:b@x/1: nothing answers; also http://c:d@y/2?password=e"
    assert shown(text) == "cannot open camera rtsp://***@x/1: nothing answers; also http://***@y/2?password=***"
    assert not any(secret in shown(text) for secret in (":b@", "c:d", "=e"))


def test_label_is_a_file_name_without_credentials():
    assert label("rtsp://admin:hunter2@cam.local:8554/live/main") == "cam.local_8554_live_main"
    assert "hunter2" not in label("http://admin:hunter2@10.0.0.5/video.cgi?pwd=hunter2")


@pytest.mark.parametrize("url, message", [
    ("ftp://cam/live", "unknown scheme ftp://"),
    ("rtsp://:554/live", "no host"),
    ("http://cam:port/x", "port is not a number"),
])
def test_bad_camera_urls_are_one_line(url, message):
    assert is_url(url)
    with pytest.raises(InputError, match=message) as e:
        check_url(url)
    assert "\n" not in str(e.value)


def test_paths_and_indices_are_not_urls():
    assert not any(map(is_url, ["0", "video.mp4", "C:/videos/a.mp4", "/data/rtsp/a.mp4", 3]))
