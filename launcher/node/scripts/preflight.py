"""Prove the fabric the way vLLM will use it, before any vLLM starts: `check`'s collective preflight.

Runs under the node's own vLLM Python (torch is all it imports; it starts no vLLM engine), with
exactly the environment the plan gives vLLM there, one process per node:

1. rendezvous: rank 0 (the head) serves a torch TCPStore on a free port of its own (found
   first by `port`, so that every node starts at once), bound to the master address only (a
   store torch binds itself listens on every interface, and anyone reaching it could forge a
   pass); the others connect to it at the master address, retrying until it listens;
2. connections: every node listens as vLLM's message queues do (a random port on its
   VLLM_HOST_IP) and connects to the nodes vLLM would connect to from here, each in the
   direction vLLM uses; every node reports what it reached: ok, refused or timed out;
3. only when every connection holds: an all-reduce of every backend asked (gloo; NCCL too on
   GPU nodes), timed: its latency on a 4-byte tensor, its bandwidth on a large one.

Everything has a deadline: gloo retries a blocked connect for about five times its timeout,
so a timer reports where it stood and ends the process at the deadline, and an alarm ends it
a moment later whatever holds the interpreter. The answer is one JSON line with `ok`;
progress comes as `{"event": ...}` lines before it.

    python UNIT preflight [--environ] DIR REQUEST_JSON   # --environ: stdin's first line is the env
    python3 UNIT preflight DIR port ADDRESS   # a free port for the head's store (no torch needed)
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time

from .common import emit, run_directory, take_environment

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any, NoReturn

STAGE = {"now": "starting", "detail": ""}
SHARED: dict[str, Any] = {}  # the store and this rank, once joined: a failure is told to the peers


def stage(name: str, detail: str = "") -> None:
    """Say where the preflight stands (the launcher reports it if the process ends without an answer)."""
    STAGE.update(now=name, detail=detail)
    emit(event="stage", stage=name, detail=detail)


def fail(error: str, **fields: Any) -> NoReturn:
    """The answer of a preflight that failed at the current stage; the peers are told; the process ends."""
    emit(ok=False, stage=STAGE["now"], error=error, **fields)
    if "store" in SHARED and not fields.get("peer_failed"):
        with contextlib.suppress(Exception):  # best effort: the store may be what failed
            SHARED["store"].set(f"failed/{SHARED['rank']}", f"{STAGE['now']}: {error}")
    os._exit(1)


def arm(deadline: float) -> None:
    """Bound the whole run: a timer that answers at the deadline, an alarm that ends it just after."""
    import signal

    def timed_out() -> None:
        waiting = f" ({STAGE['detail']})" if STAGE["detail"] else ""
        fail(f"no progress within {deadline:.0f} s at {STAGE['now']}{waiting}", timed_out=True)

    timer = threading.Timer(deadline, timed_out)
    timer.daemon = True
    timer.start()
    signal.alarm(int(deadline) + 3)  # the default action ends the process, whatever holds the GIL


def rendezvous(ask: dict[str, Any], dist: Any) -> Any:
    """Rank 0 serves the store on a free port and says which; the others connect to it."""
    from datetime import timedelta

    rank, world = ask["rank"], len(ask["nodes"])
    timeout = timedelta(seconds=float(ask["group_timeout"]))
    if rank == 0:
        try:
            bound = bound_listener(ask["master"], int(ask["port"]))
        except OSError as exc:  # the port was taken since it was found free
            fail(f"cannot serve the store on {ask['master']}:{ask['port']}: {exc.strerror or exc}")
        try:
            store = dist.TCPStore(
                ask["master"],
                int(ask["port"]),
                world,
                True,
                timeout=timeout,
                wait_for_workers=False,
                master_listen_fd=bound.fileno(),
            )
        except Exception as exc:  # torch raises its own store errors: say which and why
            fail(f"cannot serve the store on {ask['master']}:{ask['port']}: {_short(exc)}")
        SHARED["listener"] = bound  # the store serves on it: kept open as long as the store
        emit(event="listening", port=store.port, address=ask["master"])
        return store
    stage("rendezvous", f"connecting to {ask['master']}:{ask['port']}")
    try:
        return dist.TCPStore(ask["master"], int(ask["port"]), world, False, timeout=timeout)
    except Exception as exc:  # torch raises its own store errors: say which and why
        fail(f"cannot reach the head's store at {ask['master']}:{ask['port']}: {_short(exc)}")


def bound_listener(address: str, port: int) -> socket.socket:
    """A listening socket on `address` alone, for the store to serve on (torch's own binds every
    interface whatever address it is given)."""
    server = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((address, port))
    server.listen(128)
    return server


def listen(address: str) -> socket.socket:
    """A listener as vLLM's message queues bind one (a random port on VLLM_HOST_IP), accepting."""
    server = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    server.bind((address, 0))
    server.listen(64)

    def accept() -> None:
        while True:
            try:
                server.accept()[0].close()
            except OSError:  # closed: the connections are over
                return

    threading.Thread(target=accept, daemon=True).start()
    return server


def reach(host: str, port: int, seconds: float) -> str:
    """One TCP connection: ok, refused, timed out (a firewall that drops it), or why not."""
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except TimeoutError:  # socket.timeout is TimeoutError on the Pythons vLLM runs on
        return "timed out"
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return exc.strerror or str(exc)
    return "ok"


def connections(ask: dict[str, Any], store: Any) -> dict[str, str]:
    """Listen, connect to every node vLLM connects to from here, then learn every node's results."""
    from datetime import timedelta

    names = [n["name"] for n in ask["nodes"]]
    wait = timedelta(seconds=float(ask["group_timeout"]))
    server = _listening(ask, store)
    reached = {}
    for target in ask["connect"]:
        await_key(store, f"listen/{target}", wait, f"waiting for {names[target]} to listen", names)
        host, port = store.get(f"listen/{target}").decode().split()
        reached[names[target]] = reach(host, int(port), float(ask["connect_timeout"]))
    store.set(f"reached/{ask['rank']}", json.dumps(reached))
    for other, name in enumerate(names):
        await_key(store, f"reached/{other}", wait, f"waiting for {name}'s connections", names)
    server.close()
    failed = [
        f"{names[r]} -> {t}: {how}"
        for r in range(len(names))
        for t, how in json.loads(store.get(f"reached/{r}").decode()).items()
        if how != "ok"
    ]
    barrier(ask, store, "connections read")
    emit(event="reached", reached=reached)  # kept by the launcher should a later stage never answer
    if failed:
        fail("connections vLLM needs fail: " + "; ".join(failed), reached=reached)
    return reached


def _listening(ask: dict[str, Any], store: Any) -> socket.socket:
    """This node's listener, its address published in the store for the peers."""
    address = os.environ.get("VLLM_HOST_IP") or ask["nodes"][ask["rank"]]["address"]
    stage("connections", f"listening on {address}")
    try:
        server = listen(address)
    except OSError as exc:
        fail(f"cannot listen on {address} (VLLM_HOST_IP): {exc.strerror or exc}")
    host, port = server.getsockname()[:2]
    store.set(f"listen/{ask['rank']}", f"{host} {port}")
    return server


def barrier(ask: dict[str, Any], store: Any, name: str) -> None:
    """Every rank got here; the head, whose process serves the store, waits for them before going on.

    Without it the head could end (and its store with it) while a peer still reads from it.
    """
    world = len(ask["nodes"])
    store.add(name, 1)
    give_up = time.monotonic() + float(ask["group_timeout"])
    while ask["rank"] == 0 and store.add(name, 0) < world and time.monotonic() < give_up:
        time.sleep(0.01)


def await_key(store: Any, key: str, wait: Any, what: str, names: list[str]) -> None:
    """Wait for a peer's key in the store; a peer that failed meanwhile, or never writes it, fails
    this stage at once, named (rather than each node sitting out the whole timeout)."""
    stage(STAGE["now"], what)
    rank, give_up = SHARED.get("rank"), time.monotonic() + wait.total_seconds()
    try:
        while not store.check([key]):
            for peer, name in enumerate(names):
                if peer != rank and store.check([f"failed/{peer}"]):
                    told = store.get(f"failed/{peer}").decode()
                    fail(f"{what}: {name} failed ({told})", peer_failed=True)
            if time.monotonic() > give_up:
                fail(f"{what}: nothing after {wait.total_seconds():.0f} s")
            time.sleep(0.02)
    except Exception as exc:  # the store itself went away (the head ended)
        fail(f"{what}: {_short(exc)}")


def collective(ask: dict[str, Any], store: Any, backend: str, torch: Any, dist: Any) -> dict[str, float]:
    """One process group of `backend`, its all-reduce proven right, then timed: latency, bandwidth."""
    from datetime import timedelta

    stage(backend, f"process group across {len(ask['nodes'])} nodes")
    world = len(ask["nodes"])
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)  # the GPU vLLM's first local rank uses (CUDA_VISIBLE_DEVICES applies)
    timeout = timedelta(seconds=float(ask["group_timeout"]))
    group = dist.PrefixStore(backend, store)
    dist.init_process_group(backend, store=group, rank=ask["rank"], world_size=world, timeout=timeout)
    one = torch.ones(1, device=device)
    dist.all_reduce(one)
    if int(one.item()) != world:
        fail(f"{backend} all-reduce gave {one.item()}, not {world}")
    stage(backend, "all-reduce, timed")
    figures = _figures(ask, backend, one, torch, dist)
    dist.destroy_process_group()
    return figures


def _figures(ask: dict[str, Any], backend: str, one: Any, torch: Any, dist: Any) -> dict[str, float]:
    """The latency of a 4-byte all-reduce and the bandwidth of a large one (median of the rounds)."""
    world, (latency_rounds, bandwidth_rounds) = len(ask["nodes"]), ask["rounds"]
    latency = _timed(lambda: dist.all_reduce(one), latency_rounds, torch, one.device)
    big = torch.ones(int(ask["bytes"][backend]) // 4, dtype=torch.float32, device=one.device)
    dist.all_reduce(big)  # the first one sets the connections up: not timed
    seconds = _timed(lambda: dist.all_reduce(big), bandwidth_rounds, torch, one.device)
    algbw = big.numel() * 4 / seconds / 1e9
    return {
        "latency_us": round(latency * 1e6, 1),
        "bytes": big.numel() * 4,
        "algbw_gbps": round(algbw, 3),
        "busbw_gbps": round(algbw * 2 * (world - 1) / world, 3),  # what each link carried (NCCL's busbw)
    }


def _timed(op: Any, rounds: int, torch: Any, device: Any) -> float:
    """The median seconds of one call of `op` (a GPU's queue drained around each)."""
    times = []
    for _ in range(int(rounds)):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        op()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def _short(exc: BaseException) -> str:
    """An exception's first line, without torch's C++ frames."""
    lines = [
        x
        for x in str(exc).splitlines()
        if x.strip() and not x.lstrip().startswith(("frame #", "Exception raised"))
    ]
    return (lines[0] if lines else type(exc).__name__)[:300]


def preflight(directory: str, ask: dict[str, Any]) -> None:
    """Rendezvous, connections, then every backend's all-reduce; one JSON answer, then exit."""
    began = time.monotonic()
    arm(float(ask["deadline"]))
    stage("import torch")
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        fail(f"this Python cannot import torch: {exc}")
    if "nccl" in ask["backends"] and not torch.cuda.is_available():
        fail("the plan runs NCCL, but torch here sees no GPU (torch.cuda.is_available() is False)")
    stage("rendezvous")
    store = rendezvous(ask, dist)
    SHARED.update(store=store, rank=ask["rank"])
    reached = connections(ask, store)
    figures = {}
    for backend in ask["backends"]:
        try:
            figures[backend] = collective(ask, store, backend, torch, dist)
        except Exception as exc:  # gloo and NCCL raise their own errors: name the stage and the cause
            fail(f"{backend}: {_short(exc)}", reached=reached)
    barrier(ask, store, "done")
    emit(ok=True, stage="done", reached=reached, figures=figures, seconds=round(time.monotonic() - began, 2))
    os._exit(0)  # skip the backends' teardown: the answer is out


def free_port(address: str) -> None:
    """A port free on this node right now, for the head's store (so every node can start at once)."""
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        emit(ok=True, port=sock.getsockname()[1])


def main(argv: list[str]) -> None:
    """preflight [--environ] DIR REQUEST_JSON | preflight DIR port ADDRESS"""
    if argv[:1] == ["--environ"]:
        take_environment()
        argv = argv[1:]
    directory = run_directory(argv)
    if argv[1] == "port":
        free_port(argv[2])
    else:
        preflight(directory, json.loads(argv[1]))


if __name__ == "__main__":  # python -c STUB UNIT preflight ARGS...
    main(sys.argv[2:])
