"""Ray, the engine of `optimize pipeline` and `batch`: imported lazily, started locally or joined.

Timing stays honest through one custom resource: every node that may time candidates offers
`timing_slot: 1`, and a timing task asks for it, so two timed candidates never share a node's
cores. A local Ray gets the slot automatically; on a cluster start each node with
`ray start ... --resources '{"timing_slot": 1}'`.

A local Ray listens on every network interface, and whoever reaches its ports can run code on
this computer; Ray's token authentication (Ray 2.52 and later) refuses a connection without the
cluster's token. edgegaze needs a Ray that has it (MIN_RAY) and starts its local Ray with it on,
whatever Ray's own default: the token is Ray's (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or
~/.ray/auth_token) where the user has one, else a new random one that lives in this process's
environment (and Ray's processes', which inherit it) and is written nowhere. Joining a cluster
(--address) uses that cluster's token the same ways.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from pathlib import Path

from pipeline.errors import EdgegazeError

TIMING_SLOT = "timing_slot"
MIN_RAY = (2, 52)  # the first Ray with token authentication
AUTH_MODE, AUTH_TOKEN, AUTH_TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"


def require_ray():
    try:
        import ray
    except ImportError:
        raise EdgegazeError('this command runs on Ray, which is not installed: pip install -e ".[ray]"') from None
    version = tuple(int(p) for p in ray.__version__.split(".")[:2] if p.isdigit())
    if version < MIN_RAY:
        raise EdgegazeError(f"Ray {ray.__version__} has no token authentication, so anyone who reaches this computer "
                            "could run code on the Ray edgegaze starts; install Ray 2.52 or later: "
                            "pip install -U 'ray>=2.52'")
    return ray


def token_auth() -> None:
    """Turn Ray's token authentication on for the Ray this process starts or joins (Ray reads it
    from the environment, so the environment is where it goes); refuse an explicit opt-out."""
    if os.environ.get(AUTH_MODE, "token").lower() != "token":
        raise EdgegazeError(f"{AUTH_MODE}={os.environ[AUTH_MODE]}: edgegaze runs Ray only with token authentication "
                            f"(a local Ray listens on every interface); unset {AUTH_MODE}")
    os.environ[AUTH_MODE] = "token"
    has_token = os.environ.get(AUTH_TOKEN) or os.environ.get(AUTH_TOKEN_PATH) or (Path.home() / ".ray" / "auth_token").is_file()
    if not has_token:
        os.environ[AUTH_TOKEN] = secrets.token_hex(32)
    if "ray" in sys.modules:  # Ray read the mode when it was imported: re-read it, as Ray's own token setup does
        from ray._raylet import Config

        Config.initialize("")


def check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """A host:port where nothing answers: one line now, rather than Ray's own connection retries
    printed for 20 s or more before its error. ("auto" and ray:// addresses are left to Ray.)"""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise EdgegazeError(f"no Ray cluster answers at --address {address} ({e.strerror or e}); start one there "
                            "with `ray start --head`, or leave out --address for a local Ray") from None


def init(address: str | None = None, num_cpus: int | None = None):
    """Join `address` or start a local Ray (once per process; an already started one is reused)."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    token_auth()
    # workers import pipeline/ from wherever the driver does, and find the same models
    env = {k: os.environ[k] for k in ("EDGEGAZE_HOME", "EDGEGAZE_ZOO", "PYTHONPATH") if k in os.environ}
    kw = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR", runtime_env={"env_vars": env} if env else None)
    if address:
        check_reachable(address)
    try:
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count(), resources={TIMING_SLOT: 1}, **kw)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise EdgegazeError(f"cannot start or join Ray{f' at {address}' if address else ''}: {e}") from None
    return ray


def timing_node() -> str:
    """The node whose timing slot every compared candidate uses: the driver's own when it has one."""
    ray = require_ray()
    here = ray.get_runtime_context().get_node_id()
    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(TIMING_SLOT)]
    if not nodes:
        raise EdgegazeError(f"no Ray node offers the '{TIMING_SLOT}' resource; start nodes with "
                            f"--resources '{{\"{TIMING_SLOT}\": 1}}'")
    ids = [n["NodeID"] for n in nodes]
    return here if here in ids else ids[0]


def on_timing_slot(fn, node_id: str):
    """`fn` as a Ray task that holds the timing slot of `node_id` (so it runs alone there)."""
    ray = require_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return ray.remote(fn).options(num_cpus=1, resources={TIMING_SLOT: 1}, max_retries=1,
                                  scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
