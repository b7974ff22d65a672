"""`edgegaze batch`: a deployment profile over many videos, one Ray task per video.

Each video's JSON Lines are what `edgegaze run --profile P --json` writes for it (the same
run_to_outputs), first into a temp file renamed into place when the video is complete, so a
file present under OUT is finished. Beside it `<name>.source.json` records where it came from
(the video's path, size and mtime; the profile's stages and runtime, --param and --max-frames as
one sha256; the edgegaze version): a rerun skips a video only when that record matches; a record
that names another video with the same name takes a longer name (never a collision); one that
names this video but another size, mtime, profile or version stops the batch with one line
before any work, unless --force redoes it. A failing video is retried (Ray's max_retries), then
reported in summary.json and on the console; the others go on. A video whose output cannot be
written (a full disk) fails at once, its files removed.

Cameras too: `--input cameras.txt` lists one input per line (camera URLs, video paths), each run
as `edgegaze run --input URL` would (newest frame, reconnection: pipeline/cameras.py) until
--max-frames, the camera gives up, or Ctrl-C. A URL is named by its host and path, never its
credentials; its record keeps the URL as shown (credentials masked), with no size or mtime.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
import time
from collections import Counter
from pathlib import Path

from pipeline import __version__, cameras
from pipeline.cameras import LiveOptions, shown
from pipeline.errors import EdgegazeError, WriteError
from pipeline.paths import atomic_write, check_out_dir, expand, json_object
from pipeline.sources import VIDEO_EXTENSIONS

MAX_RETRIES = 2


def list_videos(spec: str) -> list[Path | str]:
    """A folder's video files, or a glob's matches, sorted; a camera URL; or the inputs a .txt file
    lists, one per line (camera URLs and video paths, relative to the file; # after a space or at the
    start of a line starts a comment)."""
    if cameras.is_url(spec):
        cameras.check_url(spec)
        return [spec]
    path = expand(spec, "--input")
    if path.suffix.lower() == ".txt" and path.is_file():
        return _listed(path)
    found = [p for p in sorted(path.iterdir()) if p.suffix.lower() in VIDEO_EXTENSIONS] if path.is_dir() else \
        [Path(p) for p in sorted(glob.glob(str(path), recursive=True))]  # ** spans folders
    found = [p for p in found if p.is_file()]
    if not found:
        raise EdgegazeError(f"--input {spec}: no videos found (give a folder of {', '.join(sorted(VIDEO_EXTENSIONS))} "
                            "files, a glob, or a .txt file listing camera URLs and videos)")
    return found


def _listed(path: Path) -> list[Path | str]:
    """The inputs a list file names, checked: URLs as they are, paths relative to the file."""
    found: list[Path | str] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        entry = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].strip()  # a URL may hold a '#' of its own
        if not entry:
            continue
        if cameras.is_url(entry):
            cameras.check_url(entry)
            found.append(entry)
            continue
        video = expand(entry, "--input")
        video = video if video.is_absolute() else path.parent / video
        if not video.is_file():
            raise EdgegazeError(f"--input {path}, line {number}: {video} is not a file; list camera URLs and video files")
        found.append(video)
    if not found:
        raise EdgegazeError(f"--input {path}: lists no input; write one camera URL or video path per line")
    if len(set(map(str, found))) < len(found):
        raise EdgegazeError(f"--input {path}: an input is listed twice; list each once")
    return found


def _names(v: Path | str) -> list[str]:
    """The names an input's output may take, shortest first: <stem>, <folder>__<stem>,
    <folder>__<name> for a video; host, port and path for a camera URL."""
    if isinstance(v, str):
        return [cameras.label(v)] * 3
    return [v.stem, f"{v.parent.name}__{v.stem}", f"{v.parent.name}__{v.name}"]


def output_names(videos: list[Path | str]) -> dict[Path | str, str]:
    """<stem>.jsonl, with the parent folder's name prefixed where stems repeat, and the video's
    extension kept too where that still repeats (a.mp4 and a.avi in one folder): each video its
    own file. Names that were unique stay as they were, so earlier outputs are still found."""
    def repeated(names: dict) -> set:
        return {n for n, count in Counter(names.values()).items() if count > 1}

    names = {v: _names(v)[0] for v in videos}
    for longer in (1, 2):
        clash = repeated(names)
        names = {v: _names(v)[longer] if n in clash else n for v, n in names.items()}
    clash = repeated(names)  # e.g. the same file name in two folders of the same name
    if clash:
        same = [shown(v) for v, n in names.items() if n in clash][:2]
        raise EdgegazeError(f"--input: {same[0]} and {same[1]} would write the same output {sorted(clash)[0]}.jsonl; "
                            "rename one, or run them in separate batches with different --out folders")
    return {v: n + ".jsonl" for v, n in names.items()}


def record_path(output: Path) -> Path:
    """`<stem>.source.json` beside `<stem>.jsonl`."""
    return output.with_name(output.name.removesuffix(".jsonl") + ".source.json")


def settings_sha256(profile, params: list[str] | None, max_frames: int | None) -> str:
    """What, besides the video, decides a batch output: the profile's spec (stages, runtime options,
    parameters) with --param over it, and --max-frames (not its measured figures or the machine it
    was measured on)."""
    settings = {"spec": profile.spec.with_params(params).to_table(), "max_frames": max_frames}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def source_record(video: Path | str, settings: str) -> dict:
    if isinstance(video, str):  # a camera URL: what it shows changes; the URL, as shown, is its identity
        return {"video": shown(video), "size": None, "mtime_ns": None, "settings_sha256": settings, "edgegaze": __version__}
    st = video.stat()
    return {"video": str(video.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "settings_sha256": settings, "edgegaze": __version__}


def _differs(had: dict, want: dict) -> str:
    """Why an output recorded as `had` is not the one `want` asks for."""
    if (had.get("size"), had.get("mtime_ns")) != (want["size"], want["mtime_ns"]):
        return f"{want['video']} has changed since (size or mtime differ)"
    if had.get("settings_sha256") != want["settings_sha256"]:
        return "with another profile, --param or --max-frames"
    return f"by edgegaze {had.get('edgegaze')}, not {want['edgegaze']}"


def plan(videos: list[Path], out: Path, records: dict[Path, dict], force: bool = False) -> tuple[dict, list]:
    """Each video's output name under `out`, and the videos to process. A name whose record names
    another video is left to it (a longer name is taken); an output of this video made from other
    inputs is an error naming why, unless `force`."""
    names, todo, taken = {}, [], set()
    for v, first in output_names(videos).items():
        options = [first, *(n + ".jsonl" for n in _names(v)[1:]),
                   f"{_names(v)[1]}-{hashlib.sha256(records[v]['video'].encode()).hexdigest()[:8]}.jsonl"]
        names[v] = next((n for n in options if n not in taken and _ours(out / n, records[v])), options[-1])
        taken.add(names[v])
        output, had = out / names[v], json_object(record_path(out / names[v]))
        if not output.exists():
            todo.append(v)
        elif had != records[v]:
            if not force:
                why = "has no record of the video it came from" if had is None else f"was made {_differs(had, records[v])}"
                raise EdgegazeError(f"--out {out}: {names[v]} {why}; --force redoes it (and any other such video), "
                                    "or give another --out")
            todo.append(v)
    return names, todo


def _ours(output: Path, record: dict) -> bool:
    """Whether `output` may be this video's: free, or recorded as made from the same file."""
    had = json_object(record_path(output))
    return had is None or had.get("video") == record["video"]  # none: free, or an older output plan checks


def process_video(video: str, profile, dest: str, max_frames: int | None, params: list[str] | None = None,
                  record: dict | None = None, live: LiveOptions | None = None) -> dict:
    """One video or camera (inside a Ray task): the profile's pipeline (with --param stage
    parameters), JSON Lines written atomically after its source record; {"error": message} for a
    file that is not a video, a camera that does not open, or an output that cannot be written (a
    retry fails the same way)."""
    from pipeline.outputs import run_to_outputs
    from pipeline.runner import use_one_opencv_thread
    from pipeline.sources import open_source

    try:
        source = open_source(video, max_frames=max_frames, live=live, events=True)
    except EdgegazeError as e:  # not a video, or corrupt: a retry fails the same way, and Ray would print its traceback
        return {"error": str(e)}
    use_one_opencv_thread()  # as `edgegaze run` does: this worker is the application here
    pipeline = profile.build(params)
    try:
        if record is not None:  # first: an output never stands without its record
            atomic_write(record_path(Path(dest)), json.dumps(record, indent=1))
        s = run_to_outputs(pipeline, source, dest, progress=False, partial=False)
    except WriteError as e:
        record_path(Path(dest)).unlink(missing_ok=True)
        return {"error": str(e)}
    if s.interrupted:
        raise EdgegazeError(f"{shown(video)}: interrupted")
    dropped = {"frames_with_dropped_face": s.frames_with_dropped_face, "dropped_reason": s.dropped_reason} \
        if s.frames_with_dropped_face else {}  # a stage could not read a face there (FrameResult.dropped)
    camera = {"camera": s.live_note} if s.live_note else {}  # its gaps and dropped frames
    return {"frames": s.frames, "frames_with_face": s.frames_with_face, **dropped, **camera, "seconds": round(s.seconds, 3)}


def _collect(ray, pending: dict, rows: dict, log, stop) -> None:
    """Wait for one task and record its outcome (a task that exhausted its retries is 'failed');
    KeyboardInterrupt once `stop` is set (Ctrl-C)."""
    done = []
    while not done:
        if stop.is_set():
            raise KeyboardInterrupt
        done, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
    video = pending.pop(done[0])[0]
    try:
        result = ray.get(done[0])
    except Exception as e:  # a RayTaskError: the worker's own exception is its .cause
        cause = getattr(e, "cause", None) or e
        result = {"error": f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1][:300]}"}
    if "error" in result:
        rows[video].update(status="failed", error=shown(result["error"]))
        log(f"  FAILED {shown(video)}: {rows[video]['error']}")
    else:
        rows[video].update(status="done", **result)
        n = result.get("frames_with_dropped_face")
        log(f"  done {shown(video)}" + (f" (a face left out on {n} frames: {result['dropped_reason']})" if n else ""))


def run_batch(input_spec: str, profile_path: str, out: str, workers: int = 2, address: str | None = None,
              max_frames: int | None = None, log=print, params: list[str] | None = None, force: bool = False,
              live: LiveOptions | None = None) -> dict:
    """Process every video not finished yet from the same inputs, at most `workers` at once;
    write summary.json. `force` redoes outputs made from other inputs (see plan); `live`: how a
    camera URL is read (reconnection, timeout)."""
    from pipeline import cluster
    from pipeline import profile as profiles

    if workers < 1:
        raise EdgegazeError("--workers must be at least 1")
    profile = profiles.load(profile_path)
    videos = list_videos(input_spec)
    # a bad --param, or a stage id or precision the profile names but this machine lacks, fails
    # here once, not in every Ray task
    profile.build(params)
    if address:  # before --out is made
        cluster.check_reachable(address)
    settings = settings_sha256(profile, params, max_frames)
    records = {v: source_record(v, settings) for v in videos}
    names, todo = plan(videos, expand(out, "--out"), records, force)
    out = check_out_dir(out)
    rows = {str(v): {"video": shown(v), "output": names[v], "status": "skipped"} for v in videos}
    ray = cluster.init(address, num_cpus=workers)
    task = ray.remote(process_video).options(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=True)
    t0 = time.perf_counter()
    jobs = [(str(v), profile, str(out / names[v]), max_frames, params, records[v], live) for v in todo]
    _run_tasks(ray, task, jobs, workers, rows, log)
    seconds = time.perf_counter() - t0
    frames = sum(r.get("frames", 0) for r in rows.values() if r["status"] == "done")
    summary = {"profile": str(profile_path), "settings_sha256": settings, "workers": workers, "max_retries": MAX_RETRIES,
               "seconds": round(seconds, 2), "frames": frames,
               "frames_per_s": round(frames / seconds, 2) if seconds and frames else 0.0,
               **{k: sum(r["status"] == k for r in rows.values()) for k in ("done", "skipped", "failed")},
               "videos": list(rows.values())}
    atomic_write(out / "summary.json", json.dumps(summary, indent=1))
    return summary


def _run_tasks(ray, task, jobs: list[tuple], workers: int, rows: dict, log) -> None:
    """One task per job, at most `workers` pending; Ctrl-C stops the videos in hand and leaves no
    part file of them."""
    from pipeline.outputs import part_path, stop_on_ctrl_c

    pending = {}
    try:
        # Ctrl-C sets `stop`, checked between short waits. An explicit handler, as run's: Python
        # raises KeyboardInterrupt only where SIGINT was not ignored at start, and a process started
        # in the background of a script inherits it ignored (the batch then ran to its end, exit 0)
        with stop_on_ctrl_c() as stop:
            for job in jobs:
                if len(pending) >= workers:
                    _collect(ray, pending, rows, log, stop)
                pending[task.remote(*job)] = job
            while pending:
                _collect(ray, pending, rows, log, stop)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        ray.wait(list(pending), num_returns=len(pending), timeout=10)  # the workers are gone before the unlink
        for job in pending.values():
            part_path(job[2]).unlink(missing_ok=True)
        raise
