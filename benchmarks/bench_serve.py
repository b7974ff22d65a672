"""`edgegaze serve`: latency from a frame's capture to its REC record at a client, and the CPU the
serving costs: 4 clients at the camera's pace against none.

One server (`edgegaze serve --input VIDEO --loop --port 0`, a real subprocess: a video stands in
for a 30 fps camera, its frames released at their rate) is measured in interleaved windows: no
client connected, then N clients (each enabling what PyGaze enables, then ENABLE_SEND_DATA), and
so on, so a change of load on the machine hits both alike. CPU: the server process's CPU time
(all threads, psutil) per second and per frame served, in each window.

Latency, every figure from a frame's capture (the REC's TIME_TICK: time.perf_counter_ns on the
server, CLOCK_MONOTONIC, which the clients read too):
- at the client: to the moment a bench client's recv returned the REC's line; every REC the
  clients received in their windows (the pipeline's work, the hand-off to the server's loop, the
  server's queue and write, the socket and the client's wake-up);
- out of the server's socket (the server's own count, printed when it stops): to the moment the
  kernel held the REC's last byte (asyncio's buffer empty after the write that carried it: a REC
  that waited behind others counts its wait); every REC the server sent over the run, which is the
  clients' RECs (also any sent after a client stopped reading at its window's end) plus the few
  each `counter` probe is sent (two probes a window);
- to the server's loop: to the moment its sample reached the server's loop, for the same RECs as
  the socket's figure (so the two compare, and their difference is the time in the server).

    python benchmarks/bench_serve.py [--seconds 10] [--rounds 3] [--clients 4] [--out results/serve]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402

from _common import load_average, machine, results_view, write_view  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VIDEO = Path(os.environ.get("EDGEGAZE_SHARED", ROOT.parent / "shared" / "data")) / "video" / "webcam_640x480.mp4"
# what PyGaze's OpenGazeTracker enables on connecting
GROUPS = ("COUNTER", "CURSOR", "EYE_LEFT", "EYE_RIGHT", "POG_BEST", "POG_FIX", "POG_LEFT", "POG_RIGHT", "PUPIL_LEFT",
          "PUPIL_RIGHT", "TIME", "TIME_TICK", "USER_DATA")
COLUMNS = ["window", "clients", "seconds", "frames", "fps", "cpu_core_pct", "cpu_ms_per_frame", "records",
           "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_max_ms"]

# what each latency figure of the summary measures, in the JSON beside the figures
MEASURES = {
    "latency": "capture (the REC's TIME_TICK) to a bench client's recv returning the REC; every REC the clients "
               "received in their windows",
    "socket": "capture to the REC's last byte held by the kernel (asyncio's buffer empty after its write; a REC "
              "behind a backlog counts its wait); every REC the server sent over the run: the clients' (also any sent "
              "after a client stopped reading at its window's end) and the few the counter probes are sent (two "
              "probes a window); the server's own count",
    "loop": "capture to the REC's sample reaching the server's loop; the same RECs as socket",
    "in_server": "socket minus loop per REC (the server's queue and write); the same RECs as socket",
}
SERVER = re.compile(r"out of the socket: p50 ([\d.]+) ms, p99 ([\d.]+) ms over (\d+) records sent \(the same records "
                    r"to the server's loop: p50 ([\d.]+), p99 ([\d.]+); in the server: p50 ([\d.]+), p99 ([\d.]+)\)")


def start_server(video: str, extra: list[str]) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "serve", "--input", video, "--loop", "--port", "0",
                             "--screen-size", "1920x1080", *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    said = []
    for line in proc.stderr:
        said.append(line)
        m = re.search(r"serving the Open Gaze API on 127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    raise RuntimeError(f"edgegaze serve did not start (exit {proc.wait()}): {''.join(said[-5:])}")


def connect(port: int, groups=GROUPS) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall("".join(f'<SET ID="ENABLE_SEND_{g}" STATE="1" />\r\n' for g in groups).encode()
              + b'<SET ID="ENABLE_SEND_DATA" STATE="1" />\r\n')
    s.setblocking(False)
    return s


def counter(port: int) -> int:
    """The server's sample counter now: one record's CNT, read by a client that leaves at once."""
    sel, counters = selectors.DefaultSelector(), []
    s = connect(port, ("COUNTER",))
    sel.register(s, selectors.EVENT_READ, {"buffer": b""})
    while not counters:
        _read(sel, 0.2, [], counters)
    sel.unregister(s)
    s.close()
    return counters[0]


def window(proc: psutil.Process, port: int, clients: int, seconds: float) -> dict:
    """One measuring window with `clients` clients: the server's CPU, the frames it served (its
    counter before and after) and the records' latencies."""
    first, cpu0, t0 = counter(port), sum(proc.cpu_times()[:2]), time.perf_counter()
    sel, latencies = selectors.DefaultSelector(), []
    socks = [connect(port) for _ in range(clients)]
    for s in socks:
        sel.register(s, selectors.EVENT_READ, {"buffer": b""})
    if socks:
        _read(sel, seconds, latencies, [])
    else:
        time.sleep(seconds)
    for s in socks:
        sel.unregister(s)
        s.close()
    frames = counter(port) - first
    cpu, elapsed = sum(proc.cpu_times()[:2]) - cpu0, time.perf_counter() - t0
    lat = np.array(latencies)
    row = {"clients": clients, "seconds": round(elapsed, 2), "frames": frames, "fps": frames / elapsed,
           "cpu_core_pct": 100 * cpu / elapsed, "cpu_ms_per_frame": 1e3 * cpu / max(frames, 1),
           "records": len(lat), "latencies": lat.tolist()}
    if len(lat):
        row.update({f"latency_p{q}_ms": float(np.percentile(lat, q)) for q in (50, 90, 99)})
        row["latency_max_ms"] = float(lat.max())
    return row


def _read(sel, seconds: float, latencies: list, counters: list) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for key, _ in sel.select(timeout=0.1):
            data = key.fileobj.recv(65536)
            now = time.perf_counter_ns()
            key.data["buffer"] += data
            *lines, key.data["buffer"] = key.data["buffer"].split(b"\n")
            for line in lines:
                tick, cnt = re.search(rb' TIME_TICK="(\d+)"', line), re.search(rb' CNT="(\d+)"', line)
                if tick:
                    latencies.append((now - int(tick.group(1))) / 1e6)
                if cnt:
                    counters.append(int(cnt.group(1)))


def summarize(rows: list[dict], clients: int) -> dict:
    served = [r for r in rows if r["clients"] == clients]
    idle = [r for r in rows if r["clients"] == 0]
    lat = np.concatenate([r["latencies"] for r in served]) if served else np.array([])
    cpu_n, cpu_0 = np.mean([r["cpu_core_pct"] for r in served]), np.mean([r["cpu_core_pct"] for r in idle])
    per_n, per_0 = np.mean([r["cpu_ms_per_frame"] for r in served]), np.mean([r["cpu_ms_per_frame"] for r in idle])
    return {"clients": clients, "records": len(lat), "latency_p50_ms": float(np.percentile(lat, 50)),
            "latency_p99_ms": float(np.percentile(lat, 99)), "latency_max_ms": float(lat.max()),
            "cpu_core_pct_served": float(cpu_n), "cpu_core_pct_idle": float(cpu_0), "cpu_ratio": float(cpu_n / cpu_0),
            "cpu_ms_per_frame_served": float(per_n), "cpu_ms_per_frame_idle": float(per_0),
            "cpu_per_frame_ratio": float(per_n / per_0)}


def figure(rows: list[dict], summary: dict, frame_ms: float):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    lat = np.sort(np.concatenate([r["latencies"] for r in rows if r["clients"]]))
    ax1.plot(lat, np.linspace(0, 1, len(lat)))
    ax1.axvline(frame_ms, color="red", linestyle="--", label=f"one frame interval ({frame_ms:.1f} ms)")
    ax1.set_xlabel("capture -> REC at the client (ms)")
    ax1.set_ylabel("share of records")
    ax1.legend()
    ax1.grid(alpha=0.3)
    labels = [f"{r['window']}: {r['clients']} clients" for r in rows]
    ax2.barh(labels, [r["cpu_core_pct"] for r in rows])
    ax2.set_xlabel("server CPU (% of one core)")
    ax2.invert_yaxis()
    fig.suptitle(f"edgegaze serve: p99 {summary['latency_p99_ms']:.1f} ms; CPU with {summary['clients']} clients "
                 f"{summary['cpu_ratio']:.2f}x none")
    fig.tight_layout()
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", default=str(VIDEO), help="video standing in for a camera (looped, paced at its rate)")
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each measuring window")
    ap.add_argument("--rounds", type=int, default=3, help="pairs of windows: none, then --clients clients")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds served before the first window")
    ap.add_argument("--out", default="results/serve")
    args = ap.parse_args()
    load_before = load_average()
    server, port = start_server(args.video, [])
    try:
        proc = psutil.Process(server.pid)
        time.sleep(args.warmup)
        rows = []
        for k in range(args.rounds):
            for clients in (0, args.clients):
                rows.append({"window": len(rows) + 1, **window(proc, port, clients, args.seconds)})
                r = rows[-1]
                print(f"window {r['window']}: {clients} clients, {r['fps']:.1f} frames/s, server CPU "
                      f"{r['cpu_core_pct']:.1f} % of a core ({r['cpu_ms_per_frame']:.2f} ms/frame)"
                      + (f", latency p50 {r['latency_p50_ms']:.1f} ms p99 {r['latency_p99_ms']:.1f} ms" if clients else ""),
                      flush=True)
    finally:
        server.terminate()
        said = server.communicate(timeout=60)[0]
    summary = {**summarize(rows, args.clients), **server_figures(said)}
    write(Path(args.out), rows, summary, args, load_before)


def server_figures(said: str) -> dict:
    """The server's own latency figures, from the line it prints when it stops (none: it sent no REC)."""
    m = SERVER.search(said)
    if not m:
        return {}
    keys = ("socket_p50_ms", "socket_p99_ms", "socket_records", "loop_p50_ms", "loop_p99_ms", "in_server_p50_ms",
            "in_server_p99_ms")
    return {k: int(v) if k == "socket_records" else float(v) for k, v in zip(keys, m.groups())}


def _ms(summary: dict, key: str) -> str:
    value = summary.get(f"{key}_ms")
    return "n/a" if value is None else f"{value:.1f} ms"


def write(out: Path, rows: list[dict], summary: dict, args, load_before) -> None:
    info = {**machine(), "load_average_before": load_before, "load_average_after": load_average()}
    import cv2

    fps = cv2.VideoCapture(args.video).get(cv2.CAP_PROP_FPS) or 30.0
    print(f"latency at the clients p50 {summary['latency_p50_ms']:.1f} ms, p99 {summary['latency_p99_ms']:.1f} ms; out of "
          f"the server's socket p50 {summary.get('socket_p50_ms', math.nan):.1f}, p99 {summary.get('socket_p99_ms', math.nan):.1f}"
          f" (one frame at 30 fps: 33.3 ms); server CPU {summary['cpu_core_pct_served']:.1f} % of a core with {args.clients} clients, "
          f"{summary['cpu_core_pct_idle']:.1f} % with none ({summary['cpu_ratio']:.2f}x; per frame served "
          f"{summary['cpu_per_frame_ratio']:.2f}x)")
    payload = {"machine": info, "video": args.video, "seconds": args.seconds, "summary": summary, "measures": MEASURES,
               "rows": [{k: v for k, v in r.items() if k != "latencies"} for r in rows]}
    intro = [f"`edgegaze serve --input {Path(args.video).name} --loop` (a {fps:.0f} fps camera's stand-in; the frames "
             f"per second it kept up with are in the table), "
             f"{args.rounds} rounds of {args.seconds:g} s windows: no client, then {args.clients} clients enabling what "
             f"PyGaze enables. {info['cpu']}, {info['cores']} cores, {info['date']}; load average (1/5/15 min) "
             f"{info['load_average_before']} before, {info['load_average_after']} after.",
             f"Latency from each frame's capture (the REC's TIME_TICK) to its arrival at a client: p50 "
             f"{summary['latency_p50_ms']:.1f} ms, p99 {summary['latency_p99_ms']:.1f} ms over {summary['records']} "
             "records (every REC the clients received in their windows). The server's own count, over the whole run "
             "(the same RECs and the few the counter probes are sent): to the REC's last byte held by the kernel "
             f"(out of the socket; a REC that waited behind others counts its wait) p50 {_ms(summary, 'socket_p50')}, "
             f"p99 {_ms(summary, 'socket_p99')} over {summary.get('socket_records', 0)} records; for the same "
             f"records, to the sample reaching the server's loop (the pipeline's work and the hand-off) p50 "
             f"{_ms(summary, 'loop_p50')}, p99 {_ms(summary, 'loop_p99')}, and in the server (its queue and write) "
             f"p50 {_ms(summary, 'in_server_p50')}, p99 {_ms(summary, 'in_server_p99')}.",
             f"Server CPU: {summary['cpu_core_pct_served']:.1f} % of a core with {args.clients} clients, "
             f"{summary['cpu_core_pct_idle']:.1f} % with none ({summary['cpu_ratio']:.2f}x); per frame served "
             f"{summary['cpu_ms_per_frame_served']:.2f} against {summary['cpu_ms_per_frame_idle']:.2f} ms "
             f"({summary['cpu_per_frame_ratio']:.2f}x: the windows served different numbers of frames where the "
             "machine was busy)."]
    caption = ("Left: the share of records that reached a client within a given time of their frame's capture (all "
               "client windows). Right: the server process's CPU in each window, in the order they ran.")
    view = results_view("edgegaze serve", intro, payload["rows"], COLUMNS, {"serve": caption},
                        {"window": "d", "clients": "d", "frames": "d", "records": "d"})
    write_view(out, "serve", payload, view, summary=intro[0], figures={"serve": figure(rows, summary, 1000 / fps)})
    print(f"wrote {out}/serve.json, .md, .png, .html")


if __name__ == "__main__":
    main()
