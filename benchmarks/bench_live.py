"""Live cameras: capture-to-pointer latency with and without newest-frame capture under a pipeline
made slower on purpose, and a live day (a soak with the camera dropped and restored).

The camera is scripts/mjpeg_camera.py on loopback, a real HTTP MJPEG stream in a process of its
own, each frame stamped with the moment it was sent (CLOCK_MONOTONIC is system-wide), so latency
runs from the camera sending a frame to its pointer step (latency) or its pipeline result (soak).

latency: the default pipeline with --slow-ms of sleep added per frame drives the mouse controller
(dry run, head mode), in turns of --seconds: frames from the newest-frame capture (what `run` and
`mouse` use since issue 49) and, in the other turns, read in the pipeline's own thread as before
(cv2.VideoCapture.read: frames queue in the socket and the decoder). Target: newest-frame p50 at
most one pipeline time plus one frame interval.

soak: the default pipeline on the camera for --minutes, read as `edgegaze run` reads a camera
(newest frame, reconnection) but with this bench's own camera settings (a 5 s camera timeout,
never giving up; run's defaults are 10 s and 120 s) and no outputs written, the camera killed
every --drop-every minutes and restarted --drop-for seconds later. Every --sample seconds: RSS, open file descriptors and threads of the process (/proc),
capture-to-result latency p50/p99, process CPU ms per frame (all threads: capture and decode
included), frames taken and dropped. Checkpointed to live_soak.json at every sample.

    python benchmarks/bench_live.py latency [--seconds 20] [--turns 3] [--slow-ms 100] [--out results/live]
    python benchmarks/bench_live.py soak latency --minutes 0.25 ...       (both, one after the other)
    nice -n 10 python benchmarks/bench_live.py soak [--minutes 60] [--drop-every 5] [--drop-for 15] [--out results/live]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from _common import default_pipeline, load_average, machine, results_view, write_view  # noqa: E402
from pipeline.api import build_pipeline  # noqa: E402
from pipeline.cameras import CameraBack, CameraEvent, CameraGone, LiveOptions, open_url  # noqa: E402
from pipeline.sources import Frame, open_source  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from mjpeg_camera import DEFAULT_VIDEO, CameraProcess, read_stamp  # noqa: E402


def camera_args(args) -> list[str]:
    return ["--video", args.video, "--fps", str(args.fps), "--stamp", *(["--frames", str(args.frames)] if args.frames else [])]


def _sequential(url: str, seconds: float):
    """Frames read in the consumer's own thread, as sources.py did before issue 49."""
    cap = open_url(url, 10.0)
    end, i = time.monotonic() + seconds, 0
    try:
        while time.monotonic() < end:
            ok, image = cap.read()
            if not ok:
                return
            yield Frame(i, i / 30, image)
            i += 1
    finally:
        cap.release()


def _newest(url: str, seconds: float):
    source = open_source(url, live=LiveOptions(reconnect_s=0, timeout_s=10.0))
    end = time.monotonic() + seconds
    for frame in source:
        yield frame
        if time.monotonic() >= end:
            break
    source.close()


def latency_turn(pipe, controller, frames, slow_s: float) -> dict:
    """Capture-to-pointer latency and pipeline time (ms) of each frame of one turn."""
    lat, busy = [], []
    for frame in frames:
        t = time.monotonic()
        fr = pipe.step(frame)
        time.sleep(slow_s)  # the pipeline, made slower on purpose
        controller.step(fr.timestamp, max(fr.faces, key=lambda r: r.face.score) if fr.faces else None)
        done = time.monotonic()
        busy.append((done - t) * 1e3)
        lat.append((done - read_stamp(frame.image, done)) * 1e3)
    return {"latency_ms": lat, "pipeline_ms": busy}


def latency(args, out: Path) -> None:
    from pipeline.control import modes
    from pipeline.control.filters import PointFilter
    from pipeline.control.mapping import Screen
    from pipeline.control.mouse import DryRunBackend, MouseController

    camera = CameraProcess(*camera_args(args))
    pipe = build_pipeline(**default_pipeline())
    screen = Screen(1920, 1080)
    technique = modes.build(modes.Mode.HEAD, modes.PointerOptions(), modes.Context(screen, px_per_deg=40.0))
    controller = MouseController(DryRunBackend(screen), technique, PointFilter())
    load_before, runs = load_average(), {"newest frame": [], "sequential": []}
    try:
        list(pipe.run(_newest(camera.url(), 2)))  # warm-up: compiled models, first detections
        for _ in range(args.turns):
            for mode, frames in (("newest frame", _newest), ("sequential", _sequential)):
                pipe.reset()
                runs[mode].append(latency_turn(pipe, controller, frames(camera.url(), args.seconds), args.slow_ms / 1e3))
    finally:
        camera.stop()
    rows = [_latency_row(mode, turns, args.fps) for mode, turns in runs.items()]
    for r in rows:
        print(f"{r['mode']}: latency p50 {r['latency_p50_ms']:.0f} ms, p99 {r['latency_p99_ms']:.0f} ms, pipeline "
              f"p50 {r['pipeline_p50_ms']:.0f} ms; target {r['target_ms']:.0f} ms: {'met' if r['target_met'] else 'missed'}")
    info = {**machine(), "load_average_before": load_before, "load_average_after": load_average()}
    payload = {"machine": info, "video": str(args.video), "fps": args.fps, "slow_ms": args.slow_ms,
               "seconds": args.seconds, "turns": args.turns, "rows": rows,
               "series": {m: [t["latency_ms"] for t in turns] for m, turns in runs.items()}}
    _write_latency(out, payload, runs)


def _latency_row(mode: str, turns: list[dict], fps: float) -> dict:
    lat = np.concatenate([t["latency_ms"] for t in turns])
    busy = np.concatenate([t["pipeline_ms"] for t in turns])
    target = float(np.percentile(busy, 50)) + 1e3 / fps
    p50 = float(np.percentile(lat, 50))
    return {"mode": mode, "frames": int(len(lat)), "latency_p50_ms": p50, "latency_p90_ms": float(np.percentile(lat, 90)),
            "latency_p99_ms": float(np.percentile(lat, 99)), "latency_last_s_ms": float(np.mean([
                np.mean(t["latency_ms"][-int(fps / 3):]) for t in turns])),  # each turn's last ~10 frames
            "pipeline_p50_ms": float(np.percentile(busy, 50)), "target_ms": target, "target_met": bool(p50 <= target)}


LATENCY_COLUMNS = ["mode", "frames", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_last_s_ms",
                   "pipeline_p50_ms", "target_ms", "target_met"]


def _write_latency(out: Path, payload: dict, runs: dict) -> None:
    info = payload["machine"]
    intro = [f"Capture-to-pointer latency of the default pipeline slowed by {payload['slow_ms']:g} ms per frame, on "
             f"`scripts/mjpeg_camera.py` at {payload['fps']:g} fps ({Path(payload['video']).name}), {payload['turns']} "
             f"turns of {payload['seconds']:g} s per mode, interleaved; {info['cpu']}, {info['cores']} cores, "
             f"{info['date']}; load average (1/5/15 min) {info['load_average_before']} before, "
             f"{info['load_average_after']} after.",
             "newest frame: the capture thread keeps only the newest frame (`run` and `mouse` since issue 49); "
             "sequential: frames read in the pipeline's thread, in order, as before. latency last s: the mean over "
             "each turn's last frames. target: pipeline p50 + one frame interval, for the newest-frame p50."]
    fig, ax = plt.subplots(figsize=(9, 4))
    for mode, turns in runs.items():
        for k, t in enumerate(turns):
            lat = np.array(t["latency_ms"])
            ax.plot(np.arange(len(lat)) / len(lat) * payload["seconds"], lat, color="C0" if mode == "newest frame" else "C3",
                    alpha=0.8, label=mode if k == 0 else None)
    ax.set_yscale("log")
    ax.set_xlabel("seconds into the turn")
    ax.set_ylabel("capture -> pointer (ms)")
    ax.axhline(payload["rows"][0]["target_ms"], color="k", ls="--", lw=1, label="target: pipeline p50 + 1 frame")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    caption = ("Capture-to-pointer latency per frame over each turn, logarithmic. Read in order, frames queue behind a "
               "slow pipeline and the pointer falls further behind the eyes; with the newest frame it stays one "
               "pipeline time behind.")
    shown = results_view("Live latency: newest frame against frames read in order", intro, payload["rows"],
                         LATENCY_COLUMNS, {"live_latency": caption},
                         {"mode": "", "frames": "d", "target_met": "", **{k: ".0f" for k in LATENCY_COLUMNS[2:-1]}})
    write_view(out, "live_latency", payload, shown, summary=intro[0], figures={"live_latency": fig})
    print(f"wrote {out}/live_latency.json, .md, .png, .html")


def proc_counts() -> tuple[float, int, int]:
    """RSS (MB), open file descriptors and threads (all, native ones included) of this process."""
    status = Path("/proc/self/status").read_text()
    rss_kb = int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])
    threads = int(next(line for line in status.splitlines() if line.startswith("Threads")).split()[1])
    return rss_kb / 1e3, len(os.listdir("/proc/self/fd")), threads


class Dropper(threading.Thread):
    """Kills the camera every `every_s` and restarts it `for_s` later; records when."""

    def __init__(self, camera: CameraProcess, every_s: float, for_s: float):
        super().__init__(daemon=True)
        self.camera, self.every_s, self.for_s = camera, every_s, for_s
        self.stop_event, self.drops = threading.Event(), []

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop_event.wait(self.every_s):
            self.camera.stop()
            gone = time.monotonic() - t0
            self.stop_event.wait(self.for_s)
            self.camera.start()
            self.drops.append([round(gone, 1), round(time.monotonic() - t0, 1)])


def _sample(t_min: float, lat: list[float], frames: int, cpu_s: float, dropped: int) -> dict:
    rss, fds, threads = proc_counts()
    return {"t_min": round(t_min, 2), "rss_mb": round(rss, 1), "fds": fds, "threads": threads, "frames": frames,
            "dropped": dropped, "latency_p50_ms": round(float(np.percentile(lat, 50)), 1) if lat else None,
            "latency_p99_ms": round(float(np.percentile(lat, 99)), 1) if lat else None,
            "cpu_ms_per_frame": round(cpu_s * 1e3 / frames, 2) if frames else None}


def soak_loop(pipe, source, args, checkpoint) -> tuple[list[dict], list[dict], bool]:
    """Samples and camera events of the run; whether it was interrupted (Ctrl-C)."""
    samples, events, lat = [], [], []
    t0 = time.monotonic()
    end, next_sample = t0 + args.minutes * 60, t0 + args.sample
    cpu, frames, dropped = time.process_time(), 0, 0
    try:
        for item in pipe.run(source):
            now = time.monotonic()
            if isinstance(item, CameraEvent):
                events.append({"event": "gone" if isinstance(item, CameraGone) else "back", "t_min": round((now - t0) / 60, 3),
                               **({"missing_s": item.missing_s} if isinstance(item, CameraBack) else {"reason": item.reason})})
                continue
            lat.append((now - read_stamp(item.image, now)) * 1e3)
            frames += 1
            if now >= next_sample or now >= end:
                samples.append(_sample((now - t0) / 60, lat, frames, time.process_time() - cpu, source.dropped - dropped))
                lat, frames, cpu, dropped = [], 0, time.process_time(), source.dropped
                next_sample += args.sample * max(1, int((now - next_sample) // args.sample) + 1)
                checkpoint(samples, events)
            if now >= end:
                break
    except KeyboardInterrupt:
        return samples, events, True
    return samples, events, False


def soak(args, out: Path) -> None:
    camera = CameraProcess(*camera_args(args))
    pipe = build_pipeline(**default_pipeline())
    source = open_source(camera.url(), live=LiveOptions(reconnect_s=None, timeout_s=5.0), events=True)
    dropper = Dropper(camera, args.drop_every * 60, args.drop_for)
    info = {**machine(), "load_average_before": load_average()}
    meta = {"machine": info, "video": str(args.video), "fps": args.fps, "minutes": args.minutes,
            "drop_every_min": args.drop_every, "drop_for_s": args.drop_for, "sample_s": args.sample}

    def checkpoint(samples, events) -> None:  # an interrupted run keeps what it measured
        tmp = out / ".live_soak.json.part"
        tmp.write_text(json.dumps({**meta, "samples": samples, "events": events, "drops": dropper.drops}))
        os.replace(tmp, out / "live_soak.json")

    out.mkdir(parents=True, exist_ok=True)
    dropper.start()
    try:
        samples, events, interrupted = soak_loop(pipe, source, args, checkpoint)
    finally:
        dropper.stop_event.set()
        source.close()
        dropper.join(args.drop_for + 10)
        camera.stop()
    info["load_average_after"] = load_average()
    warmup = min(args.warmup, args.minutes * 0.2)
    payload = {**meta, "interrupted": interrupted, "warmup_min": warmup, "summary": soak_summary(samples, events, warmup),
               "rows": samples, "samples": samples, "events": events, "drops": dropper.drops}
    _write_soak(out, payload)


def soak_summary(samples: list[dict], events: list[dict], warmup_min: float) -> dict:
    """Growth after warm-up: RSS (first sample after it -> last, and a fitted slope), descriptors and
    threads (range), latency p99 and CPU per frame (first quarter against last quarter of samples)."""
    after = [s for s in samples if s["t_min"] >= warmup_min and s["frames"]] or samples
    t, rss = np.array([s["t_min"] for s in after]), np.array([s["rss_mb"] for s in after])
    quarter = max(1, len(after) // 4)

    def ratio(key: str) -> float:
        first, last = [s[key] for s in after[:quarter]], [s[key] for s in after[-quarter:]]
        return round(float(np.mean(last) / np.mean(first)), 3)

    slope = float(np.polyfit(t, rss, 1)[0] * 60) if len(after) > 2 else 0.0
    gaps = [e["missing_s"] for e in events if e["event"] == "back"]
    return {"samples_after_warmup": len(after), "rss_first_mb": float(rss[0]), "rss_last_mb": float(rss[-1]),
            "rss_growth_pct": round(float((rss[-1] - rss[0]) / rss[0] * 100), 2),
            "rss_slope_mb_per_h": round(slope, 2),
            # the highest it rose above its level after warm-up: a reconnection trims the heap
            # (cameras._trim_heap), so RSS dips there and refills in a minute; a step would stay
            "rss_peak_growth_pct": round(float((rss.max() - rss[0]) / rss[0] * 100), 2),
            "fds_range": [min(s["fds"] for s in after), max(s["fds"] for s in after)],
            "threads_range": [min(s["threads"] for s in after), max(s["threads"] for s in after)],
            "fds_first_last": [after[0]["fds"], after[-1]["fds"]],
            "threads_first_last": [after[0]["threads"], after[-1]["threads"]],
            "latency_p50_ms": round(float(np.median([s["latency_p50_ms"] for s in after])), 1),
            "latency_p99_ms": round(float(np.median([s["latency_p99_ms"] for s in after])), 1),
            "latency_p99_last_over_first_quarter": ratio("latency_p99_ms"),
            "cpu_ms_per_frame": round(float(np.median([s["cpu_ms_per_frame"] for s in after])), 2),
            "cpu_last_over_first_quarter": ratio("cpu_ms_per_frame"),
            "frames": int(sum(s["frames"] for s in samples)), "dropped": int(sum(s["dropped"] for s in samples)),
            "camera_drops": len([e for e in events if e["event"] == "gone"]),
            "reconnected": len(gaps), "gap_s_max": round(max(gaps), 1) if gaps else None}


SOAK_COLUMNS = ["t_min", "rss_mb", "fds", "threads", "frames", "dropped", "latency_p50_ms", "latency_p99_ms",
                "cpu_ms_per_frame"]


def soak_figure(payload: dict):
    s, t = payload["samples"], [x["t_min"] for x in payload["samples"]]
    fig, axes = plt.subplots(4, 1, figsize=(9, 9), sharex=True)
    axes[0].plot(t, [x["rss_mb"] for x in s])
    axes[0].set_ylabel("RSS (MB)")
    axes[1].plot(t, [x["fds"] for x in s], label="open file descriptors")
    axes[1].plot(t, [x["threads"] for x in s], label="threads")
    axes[1].set_ylabel("count")
    axes[2].plot(t, [x["latency_p50_ms"] for x in s], label="p50")
    axes[2].plot(t, [x["latency_p99_ms"] for x in s], label="p99")
    axes[2].set_ylabel("capture -> result (ms)")
    axes[3].plot(t, [x["cpu_ms_per_frame"] for x in s])
    axes[3].set_ylabel("CPU ms per frame")
    axes[3].set_xlabel("minutes")
    gone = [e["t_min"] for e in payload["events"] if e["event"] == "gone"]
    back = [e["t_min"] for e in payload["events"] if e["event"] == "back"]
    for ax in axes:
        for a, b in zip(gone, back + [t[-1] if t else 0] * (len(gone) - len(back))):
            ax.axvspan(a, b, color="0.85", lw=0)
        ax.axvline(payload["warmup_min"], color="k", ls=":", lw=1)
        ax.grid(alpha=0.3)
    for ax in axes[1:3]:
        ax.legend(fontsize=8)
    axes[0].set_title("edgegaze live soak: the camera dropped (grey) and restored; dotted: end of warm-up")
    fig.tight_layout()
    return fig


def _write_soak(out: Path, payload: dict) -> None:
    info, sm = payload["machine"], payload["summary"]
    intro = [f"The default pipeline on `scripts/mjpeg_camera.py` ({Path(payload['video']).name} at {payload['fps']:g} fps, "
             f"HTTP MJPEG on loopback) for {payload['minutes']:g} min, newest frame and reconnection as `edgegaze run`; "
             f"the camera killed every {payload['drop_every_min']:g} min and restarted {payload['drop_for_s']:g} s later. "
             f"{info['cpu']}, {info['cores']} cores, {info['date']}; load average (1/5/15 min) "
             f"{info['load_average_before']} before, {info['load_average_after']} after.",
             f"After {payload['warmup_min']:g} min of warm-up: RSS {sm['rss_first_mb']:.1f} -> {sm['rss_last_mb']:.1f} MB "
             f"({sm['rss_growth_pct']:+.2f} %, fitted {sm['rss_slope_mb_per_h']:+.2f} MB/h; its highest "
             f"{sm['rss_peak_growth_pct']:+.2f} % above the first); open file descriptors "
             f"{sm['fds_range'][0]}-{sm['fds_range'][1]}, threads {sm['threads_range'][0]}-{sm['threads_range'][1]}; "
             f"capture-to-result latency p50 {sm['latency_p50_ms']} ms, p99 {sm['latency_p99_ms']} ms (last quarter / "
             f"first: {sm['latency_p99_last_over_first_quarter']}x); {sm['cpu_ms_per_frame']} CPU ms per frame (last "
             f"quarter / first: {sm['cpu_last_over_first_quarter']}x); camera dropped {sm['camera_drops']} times, back "
             f"{sm['reconnected']} times (longest gap {sm['gap_s_max']} s); {sm['frames']} frames, {sm['dropped']} dropped "
             "while the pipeline was busy.",
             "Each row is one sample window: frames taken in it, frames dropped (newest-frame capture), latency from "
             "the camera sending a frame to its result, process CPU time per frame (all threads)."]
    caption = ("Resident memory, descriptors and threads, latency and CPU per frame over the run; grey: the camera gone "
               "(killed, then restarted and reconnected).")
    shown = results_view("Live soak: a camera that drops, over a long run", intro, payload["rows"], SOAK_COLUMNS,
                         {"live_soak": caption}, {"t_min": ".1f", "rss_mb": ".1f", "fds": "d", "threads": "d",
                                                  "frames": "d", "dropped": "d", "latency_p50_ms": ".1f",
                                                  "latency_p99_ms": ".1f"})
    write_view(out, "live_soak", payload, shown, summary=intro[1], figures={"live_soak": soak_figure(payload)})
    print(intro[1])
    print(f"wrote {out}/live_soak.json, .md, .png, .html")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="+", choices=["latency", "soak"], help="what to measure (both: one after the other)")
    ap.add_argument("--video", default=str(DEFAULT_VIDEO), help="video the camera stand-in serves, looped")
    ap.add_argument("--fps", type=float, default=30.0, help="the camera's frame rate")
    ap.add_argument("--frames", type=int, help="serve only the video's first N frames, looped (a faster camera start)")
    ap.add_argument("--seconds", type=float, default=20.0, help="latency: seconds per turn")
    ap.add_argument("--turns", type=int, default=3, help="latency: turns per mode, interleaved")
    ap.add_argument("--slow-ms", type=float, default=100.0, help="latency: sleep added to each frame's pipeline")
    ap.add_argument("--minutes", type=float, default=60.0, help="soak: length of the run")
    ap.add_argument("--drop-every", type=float, default=5.0, help="soak: minutes between camera drops")
    ap.add_argument("--drop-for", type=float, default=15.0, help="soak: seconds the camera stays away")
    ap.add_argument("--sample", type=float, default=30.0, help="soak: seconds per sample")
    ap.add_argument("--warmup", type=float, default=2.0, help="soak: minutes of warm-up (at most a fifth of the run)")
    ap.add_argument("--out", default="results/live")
    args = ap.parse_args()
    for what in args.what:
        (latency if what == "latency" else soak)(args, Path(args.out))


if __name__ == "__main__":
    main()
