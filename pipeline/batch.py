"""`edgegaze batch`: a deployment profile over many videos, one Ray task per video.

Each video's JSON Lines are what `edgegaze run --profile P --json` writes for it (the same
run_to_outputs), first into a temp file renamed into place when the video is complete, so a
file present under OUT is finished: a rerun skips it. A failing video is retried (Ray's
max_retries), then reported in summary.json and on the console; the others go on.
"""

from __future__ import annotations

import glob
import json
import os
import time
from collections import Counter
from pathlib import Path

from pipeline.errors import EdgegazeError
from pipeline.paths import atomic_write, check_out_dir, expand
from pipeline.sources import VIDEO_EXTENSIONS

MAX_RETRIES = 2


def list_videos(spec: str) -> list[Path]:
    """A folder's video files, or a glob's matches, sorted."""
    path = expand(spec, "--input")
    found = [p for p in sorted(path.iterdir()) if p.suffix.lower() in VIDEO_EXTENSIONS] if path.is_dir() else \
        [Path(p) for p in sorted(glob.glob(str(path), recursive=True))]  # ** spans folders
    found = [p for p in found if p.is_file()]
    if not found:
        raise EdgegazeError(f"--input {spec}: no videos found (give a folder of {', '.join(sorted(VIDEO_EXTENSIONS))} files or a glob)")
    return found


def output_names(videos: list[Path]) -> dict[Path, str]:
    """<stem>.jsonl, with the parent folder's name prefixed where stems repeat, and the video's
    extension kept too where that still repeats (a.mp4 and a.avi in one folder): each video its
    own file. Names that were unique stay as they were, so earlier outputs are still found."""
    def repeated(names: dict) -> set:
        return {n for n, count in Counter(names.values()).items() if count > 1}

    names = {v: v.stem for v in videos}
    for longer in (lambda v: f"{v.parent.name}__{v.stem}", lambda v: f"{v.parent.name}__{v.name}"):
        clash = repeated(names)
        names = {v: longer(v) if n in clash else n for v, n in names.items()}
    clash = repeated(names)  # e.g. the same file name in two folders of the same name
    if clash:
        same = [str(v) for v, n in names.items() if n in clash][:2]
        raise EdgegazeError(f"--input: {same[0]} and {same[1]} would write the same output {sorted(clash)[0]}.jsonl; "
                            "rename one, or run them in separate batches with different --out folders")
    return {v: n + ".jsonl" for v, n in names.items()}


def process_video(video: str, profile: dict, dest: str, max_frames: int | None, params: list[str] | None = None) -> dict:
    """One video (inside a Ray task): the profile's pipeline (with --param stage parameters), JSON
    Lines written atomically; {"error": message} for a file that is not a video."""
    from pipeline import profile as profiles
    from pipeline.outputs import part_path, run_to_outputs
    from pipeline.sources import open_source

    try:
        source = open_source(video, max_frames=max_frames)
    except EdgegazeError as e:  # not a video, or corrupt: a retry fails the same way, and Ray would print its traceback
        return {"error": str(e)}
    pipeline = profiles.build_pipeline(profile, params=params)
    tmp = part_path(dest)
    s = run_to_outputs(pipeline, source, str(tmp), progress=False)
    if s.interrupted:
        tmp.unlink(missing_ok=True)  # a part file would look like work in progress
        raise EdgegazeError(f"{video}: interrupted")
    os.replace(tmp, dest)
    return {"frames": s.frames, "frames_with_face": s.frames_with_face, "seconds": round(s.seconds, 3)}


def _collect(ray, pending: dict, rows: dict, log) -> None:
    """Wait for one task and record its outcome (a task that exhausted its retries is 'failed')."""
    done, _ = ray.wait(list(pending), num_returns=1)
    video = pending.pop(done[0])
    try:
        result = ray.get(done[0])
    except Exception as e:  # a RayTaskError: the worker's own exception is its .cause
        cause = getattr(e, "cause", None) or e
        result = {"error": f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1][:300]}"}
    if "error" in result:
        rows[video].update(status="failed", error=result["error"])
        log(f"  FAILED {video}: {rows[video]['error']}")
    else:
        rows[video].update(status="done", **result)
        log(f"  done {video}")


def run_batch(input_spec: str, profile_path: str, out: str, workers: int = 2, address: str | None = None,
              max_frames: int | None = None, log=print, params: list[str] | None = None) -> dict:
    """Process every video not finished yet, at most `workers` at once; write summary.json."""
    from pipeline import cluster
    from pipeline import profile as profiles
    from pipeline.outputs import part_path

    if workers < 1:
        raise EdgegazeError("--workers must be at least 1")
    profile = profiles.load(profile_path)
    videos = list_videos(input_spec)
    # a bad --param, or a stage id or precision the profile names but this machine lacks, fails
    # here once, not in every Ray task
    profiles.build_pipeline(profile, params=params)
    if address:  # before --out is made
        cluster.check_reachable(address)
    out = check_out_dir(out)
    names = output_names(videos)
    rows = {str(v): {"video": str(v), "output": names[v], "status": "skipped"} for v in videos}
    todo = [v for v in videos if not (out / names[v]).exists()]
    ray = cluster.init(address, num_cpus=workers)
    task = ray.remote(process_video).options(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=True)
    t0, pending = time.perf_counter(), {}
    try:
        for v in todo:
            if len(pending) >= workers:
                _collect(ray, pending, rows, log)
            pending[task.remote(str(v), profile, str(out / names[v]), max_frames, params)] = str(v)
        while pending:
            _collect(ray, pending, rows, log)
    except KeyboardInterrupt:  # Ctrl-C: stop the videos in hand and leave no part files of them
        for ref in pending:
            ray.cancel(ref, force=True)
        ray.wait(list(pending), num_returns=len(pending), timeout=10)  # the workers are gone before the unlink
        for video in pending.values():
            tmp = part_path(out / names[Path(video)])  # process_video's temp file, and run_to_outputs' own under it
            for part in (tmp, part_path(tmp)):
                part.unlink(missing_ok=True)
        raise
    seconds = time.perf_counter() - t0
    frames = sum(r.get("frames", 0) for r in rows.values() if r["status"] == "done")
    summary = {"profile": str(profile_path), "workers": workers, "max_retries": MAX_RETRIES, "seconds": round(seconds, 2),
               "frames": frames, "frames_per_s": round(frames / seconds, 2) if seconds and frames else 0.0,
               **{k: sum(r["status"] == k for r in rows.values()) for k in ("done", "skipped", "failed")},
               "videos": list(rows.values())}
    atomic_write(out / "summary.json", json.dumps(summary, indent=1))
    return summary
