"""Ray for a study, bounded: starting a local instance or joining a cluster, placing the actors, Ray's own output.

Joining never hangs: the address is resolved (``auto``: RAY_ADDRESS, or the cluster `ray start --head` last
started on this machine, as Ray records it in its temporary folder) and its port tried first (nothing
listening: refused at once), Ray's connection retries are bounded (``RAY_ENV``, set before
Ray is first imported; a variable already set wins), and every failure to join (no cluster there, not a Ray
head's port, the token missing or refused, another Ray or Python version) is one InputError naming the
address and the fix. Actors given no worker within ``placement_seconds()`` are named with what they asked
for and what the cluster has free; the study goes on with those placed, or stops (InputError) where none is.
Ray's own messages (its logging, the raylet's dumps it prints on stdout, the C++ client's warnings while
connecting) go to a log file (the study's OUT/ray.log), not to the terminal.
"""
from __future__ import annotations

import contextlib
import math
import os
import re
import socket
import sys
import time
from pathlib import Path
from typing import Iterator

from probes.base.errors import InputError, require

# Ray's connection retries (read when Ray is imported): without them a join of an address where no Ray head
# answers retries for minutes (35 s per try × 20 tries)
RAY_ENV = {"RAY_py_gcs_connect_timeout_s": "5", "RAY_gcs_rpc_server_connect_timeout_s": "3"}
# RAY_gcs_server_port_wait_time_s while joining: tries of about 1 s (a refused token) to 11 s (no answer)
JOIN_TRIES = "2"
PLACEMENT_SECONDS = 60.0  # how long an actor may wait for a free CPU/GPU before it is given up
PORT_SECONDS = 5.0  # how long the head's port may take to accept a TCP connection
TOKEN_FIX = ("set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to the head's token (`ray get-auth-token` on the head; "
             "or the token's file in RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)")


def placement_seconds() -> float:
    """How long an actor may wait to be placed: PROBES_RAY_PLACEMENT_S, else PLACEMENT_SECONDS."""
    return float(os.environ.get("PROBES_RAY_PLACEMENT_S") or PLACEMENT_SECONDS)


def import_ray():
    """Ray, imported with its connection retries bounded (``RAY_ENV``, where not already set); InputError naming
    the extra to install without it."""
    if "ray" not in sys.modules:
        for name, value in RAY_ENV.items():
            os.environ.setdefault(name, value)
    return require("ray", "ray", "the ray engine")


def start_local(cpus: int) -> str:
    """Start a new local Ray instance with `cpus` CPUs (never a cluster that happens to run here: that is
    --address); what started."""
    ray = import_ray()
    ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    return f"a local Ray instance with {cpus} CPUs"


def join(address: str) -> str:
    """Join the Ray cluster at `address` ("auto": RAY_ADDRESS, or the one `ray start --head` last started on this
    machine; HOST:PORT: its head's); what it joined. InputError (one line: the address and the fix) where it
    cannot be joined."""
    ray = import_ray()
    from ray._private.services import canonicalize_bootstrap_address
    from ray._private.utils import read_ray_address

    given = (os.environ.get("RAY_ADDRESS") or read_ray_address()) if address == "auto" else address
    if not given:  # (not Ray's own fallback for auto: any GCS process on the machine, whoever started it)
        raise InputError("--address auto: no Ray cluster was started on this machine (no RAY_ADDRESS, no "
                         "ray_current_cluster in Ray's temporary folder): start one (`ray start --head`) or give "
                         "its head's HOST:PORT; without --address a new local Ray instance starts")
    try:
        target = canonicalize_bootstrap_address(given)
    except (ConnectionError, ValueError) as e:
        raise InputError(f"--address {address}: not a Ray address ({e}): give the head's HOST:PORT "
                         f"(`ray start --head` prints it; default port 6379)") from None
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=PORT_SECONDS).close()
    except (OSError, ValueError) as e:
        raise InputError(f"--address {address}: no Ray cluster at {target} ({e}): start its head there "
                         f"(`ray start --head --port {port}`) or give the head's HOST:PORT") from None
    waited = os.environ.get("RAY_gcs_server_port_wait_time_s")
    os.environ["RAY_gcs_server_port_wait_time_s"] = waited or JOIN_TRIES
    try:
        ray.init(address=target, log_to_driver=False)
    except (ConnectionError, RuntimeError, ray.exceptions.AuthenticationError) as e:
        raise InputError(f"--address {address}: {refusal(target, e)}") from None
    finally:
        if waited is None:
            del os.environ["RAY_gcs_server_port_wait_time_s"]
    return f"joined the Ray cluster at {target}"


def refusal(target: str, error: BaseException) -> str:
    """Why the cluster at `target` could not be joined, and the fix, from Ray's exception."""
    text = "\n".join(str(e) for e in (error, error.__cause__, error.__context__) if e is not None)
    versions = re.findall(r"Ray: (\S+)\s+Python: (\S+)", text)
    if "Version mismatch" in text and len(versions) == 2:
        (ray_there, python_there), (ray_here, python_here) = versions
        return (f"the Ray cluster at {target} runs Ray {ray_there} on Python {python_there}, this process Ray "
                f"{ray_here} on Python {python_here}: run the study with the cluster's versions")
    if "no authentication token was found" in text:
        return f"RAY_AUTH_MODE=token but no token is set here to join {target}: {TOKEN_FIX}"
    if "InvalidAuthToken" in text or "Unauthenticated" in text:
        if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
            return f"the Ray cluster at {target} asks for token authentication: {TOKEN_FIX}"
        return f"the Ray cluster at {target} refused this token: {TOKEN_FIX}"
    return (f"no Ray head answers at {target} (the port is open, but not a Ray head's GCS port): give the head's "
            f"HOST:PORT as `ray start --head` printed it (default port 6379)")


def capacity(resources: dict[str, float]) -> int:
    """How many actors asking for `resources` ({"num_cpus": 1} or {"num_gpus": 1}) the cluster has free room for."""
    ray = import_ray()
    free = ray.available_resources()
    return min(math.floor(free.get(key, 0.0) / amount + 1e-9) for key, amount in _asked(resources).items())


def describe(resources: dict[str, float]) -> str:
    """What an actor asks for and what the cluster has free of it: "1 CPU; the cluster has 0 of 2 CPUs free"."""
    ray = import_ray()
    free, total = ray.available_resources(), ray.cluster_resources()
    asked = _asked(resources)
    has = ", ".join(f"{free.get(k, 0.0):g} of {total.get(k, 0.0):g} {k}s free" for k in asked)
    return f"{' and '.join(f'{v:g} {k}' for k, v in asked.items())}; the cluster has {has}"


def _asked(resources: dict[str, float]) -> dict[str, float]:
    """Ray's resource names for an actor's options: {"num_cpus": 1} -> {"CPU": 1}."""
    return {{"num_cpus": "CPU", "num_gpus": "GPU"}[k]: v for k, v in resources.items()}


def place(actors: list, seconds: float) -> tuple[dict[int, tuple[str, str]], list[int]]:
    """Wait for `actors` to start: ({index: (node id, IP address)} of those started, the indices of those that
    died starting or were given no worker within `seconds` (no free CPU/GPU: killed, so their resources are not
    waited for any longer)). One given its worker is waited for until it starts or dies: its process imports
    probes and torch, which takes long on a loaded node but ends."""
    ray = import_ray()
    waiting = {a.where.remote(): i for i, a in enumerate(actors)}
    placed, lost = {}, []
    deadline = time.monotonic() + seconds
    while waiting:
        done, _ = ray.wait(list(waiting), num_returns=len(waiting), timeout=0.5)
        for ref in done:
            i = waiting.pop(ref)
            try:
                placed[i] = ray.get(ref)
            except ray.exceptions.RayError:
                lost.append(i)
        if time.monotonic() > deadline:
            for ref, i in list(waiting.items()):
                if not _has_worker(actors[i]):
                    lost.append(waiting.pop(ref))
    for i in lost:
        ray.kill(actors[i])
    return placed, sorted(lost)


def _has_worker(actor) -> bool:
    """Whether Ray has given `actor` a worker process (its address' port is set once one is leased; Ray's state
    API would need the dashboard, which a cluster may not run)."""
    from ray._private.state import actors

    return actors(actor._actor_id.hex())["Address"]["Port"] != 0


@contextlib.contextmanager
def ray_output(log: Path | None, stderr_too: bool = False) -> Iterator[None]:
    """Ray's output into `log` (appended) while inside: stdout (Python's and the file descriptor's: the raylet's
    dumps, printed by Ray's error listener), Ray's logging, and with `stderr_too` file descriptor 2 as well (the
    C++ client's warnings while connecting). Nothing is moved where `log` is None."""
    if log is None:
        yield
        return
    import logging

    log.parent.mkdir(parents=True, exist_ok=True)
    streams = [1, 2] if stderr_too else [1]
    logger = logging.getLogger("ray")
    with open(log, "a", encoding="utf-8", buffering=1) as sink:
        handler = logging.StreamHandler(sink)
        handlers, propagate = logger.handlers[:], logger.propagate
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        saved = {fd: os.dup(fd) for fd in streams}
        try:
            for fd in streams:
                os.dup2(sink.fileno(), fd)
            logger.handlers, logger.propagate = [handler], False
            with contextlib.redirect_stdout(sink):
                yield
        finally:
            logger.handlers, logger.propagate = handlers, propagate
            sys.stdout.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)


def where() -> tuple[str, str]:
    """(Ray node id, the node's IP address) of the Ray worker this is called in."""
    ray = import_ray()
    return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()

