"""A real two-node Ray cluster on one machine, for tests/test_cluster.py (not a test itself).

Run inside a fresh network namespace (`unshare --net`, loopback up): every address Ray picks is
127.0.0.1 and no port can collide with another Ray on the machine. Starts a head and a second
node (`ray start --block`, each with 1 CPU and its own `timing_slot`), runs `edgegaze optimize
pipeline --address` and `edgegaze batch --address` on it, SIGKILLs the second node's raylet while
a batch task runs there, and prints one JSON line of what happened. Every process it started is
killed by pid at the end.

usage: two_node_cluster.py VIDEO_DIR PROFILE OUT
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_args() -> list[str]:
    """One node's ports, all free ones (two nodes share the loopback address)."""
    ports = ("node-manager-port", "object-manager-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
             "runtime-env-agent-port", "metrics-export-port")
    return [a for p in ports for a in (f"--{p}", str(free_port()))] + [
        "--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--resources", '{"timing_slot": 1}',
        "--disable-usage-stats", "--block"]


def wait_for_nodes(address: str, n: int, env: dict, timeout_s: float = 120) -> None:
    probe = (f"import ray, time; ray.init(address='{address}', logging_level='ERROR')\n"
             f"t = time.time()\nwhile sum(x['Alive'] for x in ray.nodes()) < {n} and time.time() - t < {timeout_s}:\n"
             "    time.sleep(0.5)\nprint(sum(x['Alive'] for x in ray.nodes()))")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=timeout_s + 60)
    if out.stdout.strip() != str(n):
        raise RuntimeError(f"the cluster did not reach {n} nodes: {out.stdout} {out.stderr[-2000:]}")


def running_on(node: subprocess.Popen, task: str) -> bool:
    """Whether a worker of `node` (a `ray start --block` process) runs `task` now."""
    try:
        procs = psutil.Process(node.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    for p in procs:
        try:
            if task in " ".join(p.cmdline()):
                return True
        except psutil.Error:
            continue
    return False


def raylet_of(node: subprocess.Popen) -> psutil.Process:
    return next(p for p in psutil.Process(node.pid).children(recursive=True) if p.name() == "raylet")


def kill_tree(proc: subprocess.Popen) -> None:
    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in family:
        try:
            p.kill()
        except psutil.Error:
            pass
    proc.wait(timeout=30)


def edgegaze(*args: str, env: dict, **kw):
    return [sys.executable, "-m", "pipeline", *args], dict(env=env, cwd=ROOT, text=True, **kw)


def main(video_dir: str, profile: str, out: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0",
           # a cluster's nodes and clients share one token (Ray turns token auth on by itself
           # where ~/.ray/auth_token exists; set here so that every process agrees either way)
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    port = free_port()
    address = f"127.0.0.1:{port}"
    nodes, result = [], {"address": address}
    try:
        nodes.append(subprocess.Popen([RAY, "start", "--head", "--port", str(port), "--temp-dir", temp,
                                       "--include-dashboard", "false", *node_args()], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_nodes(address, 1, env)
        nodes.append(subprocess.Popen([RAY, "start", "--address", address, *node_args()], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_nodes(address, 2, env)
        t0 = time.monotonic()
        cmd, kw = edgegaze("optimize", "pipeline", "--input", str(next(Path(video_dir).iterdir())),
                           "--budget-cpu-ms", "1000", "--max-candidates", "2", "--max-frames", "4",
                           "--address", address, "--out", f"{out}/search", env=env, capture_output=True)
        search = subprocess.run(cmd, **kw, timeout=600)
        result["search"] = {"rc": search.returncode, "seconds": round(time.monotonic() - t0, 1),
                            "stderr": search.stderr[-3000:]}
        t0 = time.monotonic()
        cmd, kw = edgegaze("batch", "--input", video_dir, "--profile", profile, "--out", f"{out}/batch", "--workers", "2",
                           "--max-frames", "30", "--address", address, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        batch = subprocess.Popen(cmd, **kw)
        while batch.poll() is None and not running_on(nodes[1], "process_video"):
            time.sleep(0.05)
        if batch.poll() is None:
            raylet_of(nodes[1]).send_signal(signal.SIGKILL)  # the second node dies with a video in hand
            result["killed_after_s"] = round(time.monotonic() - t0, 1)
        stdout, stderr = batch.communicate(timeout=600)
        result["batch"] = {"rc": batch.returncode, "seconds": round(time.monotonic() - t0, 1),
                           "stdout": stdout[-3000:], "stderr": stderr[-3000:]}
    finally:
        for node in reversed(nodes):
            kill_tree(node)
    return result


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
