"""What every node script shares: JSON out, state files, and finding our processes.

The node scripts take the standard library only, Python 3.8 or newer: nothing is installed
on the nodes but the launcher's unit (see `__init__.py`), which runs one script a call as
`python3 -S -c STUB UNIT NAME DIR ARGS...`. DIR is the node's run directory,
`~/.spark-launch/<cluster>/<node>`.

Every run spark-launch starts is a session of its own, recorded in state.json, and its
processes carry SPARK_LAUNCH_RUN=<cluster>/<node>/<run id> in their environment: processes
are ours by that session (which none can leave by dropping a variable) and that marker.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading

TYPE_CHECKING = False  # a node imports `typing` in 2 ms: these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

MARKER = "SPARK_LAUNCH_RUN"
LABEL = "spark-launch.cluster"  # on every container spark-launch starts: <cluster>
_AHEAD: dict[tuple[str, ...], tuple[threading.Thread, dict[str, Any]]] = {}  # see `ahead`

# The weight files at a model directory's top, as the launcher counts them.
WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def emit(**fields: Any) -> None:
    """Print the one JSON line the launcher reads."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def ahead(commands: list[list[str]], timeout: float | None) -> None:
    """Start each command now, each on a thread of its own, for `ran` to collect: the slow tools
    a script asks (every nvidia-smi initializes the driver, a fraction of a second) run side by
    side instead of one after the other."""
    for argv in commands:
        box: dict[str, Any] = {}

        def run(argv: list[str] = argv, box: dict[str, Any] = box) -> None:
            try:
                box["done"] = subprocess.run(
                    argv, capture_output=True, text=True, timeout=timeout, check=False
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                box["error"] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        _AHEAD[tuple(argv)] = (thread, box)


def ran(argv: list[str], timeout: float | None) -> subprocess.CompletedProcess[str]:
    """`argv` run with its output captured as text, as subprocess.run does it (OSError and
    TimeoutExpired raised alike); the answer of the same command started `ahead`, if it was."""
    started = _AHEAD.pop(tuple(argv), None)
    if started is None:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    thread, box = started
    thread.join()
    if "error" in box:
        raise box["error"]
    done: subprocess.CompletedProcess[str] = box["done"]
    return done


def take_environment() -> None:
    """Take into os.environ the environment the launcher sent as stdin's first line (one JSON
    object): its values never reach an argv, which `ps` shows every user of the node."""
    os.environ.update(json.loads(sys.stdin.readline()))


def read_json(path: str, default: Any = None) -> Any:
    """A JSON file's content, or `default` when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def take_json(path: str) -> Any:
    """A job file's content (None when unreadable); the file is removed at once."""
    data = read_json(path)
    with contextlib.suppress(OSError):
        os.remove(path)
    return data


def write_json(path: str, data: Any) -> None:
    """Replace a JSON file atomically."""
    replace_file(path, json.dumps(data))


def replace_file(path: str, text: str) -> None:
    """Replace a file atomically, through a temporary file beside it that no one can guess or
    plant (created exclusively, mode 0600): a reader sees the old content or the new."""
    import tempfile  # here: most calls of most scripts write nothing, and it imports much

    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".spark-launch-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def private_dirs(path: str) -> None:
    """Create path and each missing folder above it, mode 0700 (as `umask 077; mkdir -p` does)."""
    parent = os.path.dirname(path)
    if parent and parent != path and not os.path.isdir(parent):
        private_dirs(parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)


def keep_file(relative: str, text: str) -> str | None:
    """Keep `text` at ~/relative, mode 0600 in 0700 folders, replaced whole: a file that travels
    with another call (a run's receipt, with the head's start or with the lock's release). Why
    it could not be kept, or None."""
    parts = relative.split("/")
    if relative.startswith("/") or not all(p and p not in (".", "..") for p in parts):
        return f"{relative!r} is not a path inside the home"
    path = os.path.join(os.path.expanduser("~"), *parts)
    try:
        private_dirs(os.path.dirname(path))
        replace_file(path, text)
    except OSError as exc:
        return f"cannot keep {relative}: {exc.strerror or exc}"
    return None


def private_dir(path: str) -> bool:
    """Create path (mode 0700) if missing; True when it is a directory of this user that no one
    else may write (not a link, not group- or world-writable)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    st = os.lstat(path)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def which(program: str) -> str | None:
    """The executable `program` on PATH, as shutil.which finds it (shutil and what it imports
    cost a node a millisecond for this one lookup)."""
    found = os.environ.get("PATH", os.defpath)
    for folder in found.split(os.pathsep) if found else ():  # PATH="": nothing, as shutil says
        path = os.path.join(folder or os.curdir, program)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return None


def read_text(path: str | None) -> str | None:
    """A small file's text, or None."""
    try:
        with open(str(path)) as f:
            return f.read()
    except OSError:
        return None


def proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, process group, session, start time in clock ticks since boot) of a process; None
    when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[2]), int(fields[3]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def carries(pid: int, needle: bytes) -> bool:
    """True when the process's environment has a variable starting with `needle`."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return any(item.startswith(needle) for item in f.read().split(b"\0"))
    except OSError:
        return False


def our_processes(directory: str) -> dict[int, int]:
    """{pid: pgid} of the live (non-zombie) processes of this node's runs.

    A run is its session: the start wrapper leads a new one, and every process it starts
    stays in it, whatever it does to its environment (vLLM's workers drop the marker) or its
    process group. Ours: every member of the session state.json records (unless that pid
    now leads another session), of the session of any process carrying our marker, and
    those processes themselves.
    """
    needle = f"{MARKER}={node_prefix(directory)}".encode()
    table, marked = {}, set()
    for entry in os.listdir("/proc"):
        info = proc_stat(int(entry)) if entry.isdigit() else None
        if info is not None and info[0] not in ("Z", "X"):  # a zombie is gone for our purposes
            table[int(entry)] = info
            if carries(int(entry), needle):
                marked.add(int(entry))
    sessions = {table[pid][2] for pid in marked}
    state = read_json(state_path(directory)) or {}
    if isinstance(state, dict) and run_session(state) is not None:
        sessions.add(int(state["sid"]))
    return {pid: info[1] for pid, info in table.items() if pid in marked or info[2] in sessions}


def run_session(state: dict[str, Any]) -> int | None:
    """The session of the run state.json describes, while it can still be ours: its leader is
    gone (no one can take a session id while a member lives), or is the very process that
    started the run (the same start time)."""
    sid, started = state.get("sid"), state.get("leader_start")
    if not isinstance(sid, int) or isinstance(sid, bool) or sid <= 1:
        return None
    leader = proc_stat(sid)
    return sid if leader is None or (started is not None and leader[3] == started) else None


RUN_ROOT = ".spark-launch"  # the run directories' root under the remote home


def node_prefix(directory: str) -> str:
    """The marker prefix of this node's processes: <cluster>/<node>/, or, for one deployment of
    several, <cluster>/<deployment>/<node>/ (everything under the run root)."""
    parts = directory.rstrip("/").split("/")
    root = len(parts) - 1 - parts[::-1].index(RUN_ROOT) if RUN_ROOT in parts else len(parts) - 3
    return "/".join(parts[root + 1 :]) + "/"


def owner_of(directory: str) -> str:
    """Whose run directory this is: the cluster, or <cluster>/<deployment> (the container label)."""
    return node_prefix(directory).rstrip("/").rpartition("/")[0]


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the docker CLI, capturing its output."""
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def container_state(name: str) -> dict[str, Any]:
    """Whether the container exists and runs, its exit status, main pid, id and cluster label."""
    fields = "{{.State.Running}} {{.State.ExitCode}} {{.State.Pid}} {{.Id}} {{index .Config.Labels %s}}"
    done = docker("inspect", "--type", "container", "--format", fields % json.dumps(LABEL), name)
    words = done.stdout.split()
    if done.returncode != 0 or len(words) < 5:
        return {"exists": False, "running": False, "exit_code": None, "pid": None, "id": None, "label": None}
    running = words[0] == "true"
    return {
        "exists": True,
        "running": running,
        "exit_code": None if running else int(words[1]),
        "pid": int(words[2]) if running else None,
        "id": words[3],
        "label": None if words[4] == "<no value>" else words[4],
    }


def container_processes(container_id: str) -> int:
    """How many processes run in the container (by its cgroup, readable without root)."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cgroup") as f:
                    count += container_id in f.read()
            except OSError:
                continue
    return count


def save_container_log(name: str, path: str) -> None:
    """Copy the container's whole log (stdout and stderr, in order) to `path`."""
    with open(path, "w") as out:
        subprocess.run(["docker", "logs", name], stdout=out, stderr=subprocess.STDOUT, check=False)


def image_info(image: str) -> dict[str, Any]:
    """The image as this node's engine holds it: id, repo digests, size (or why there is none)."""
    try:
        done = docker("image", "inspect", "--format", "{{json .}}", image)
    except OSError:
        return {"docker": False, "image_id": None, "error": "no docker command on this node"}
    if done.returncode != 0:
        error = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"docker": True, "image_id": None, "error": error}
    data = json.loads(done.stdout)
    return {
        "docker": True,
        "image_id": data.get("Id"),
        "repo_digests": sorted(data.get("RepoDigests") or []),
        "size": data.get("Size"),
    }


def state_path(directory: str) -> str:
    """The node's state.json: what runs (or last ran) here."""
    return os.path.join(directory, "state.json")


def unit_file() -> str:
    """The unit this runs from: the zip file holding this package (`python3 UNIT SCRIPT ARGS...`
    runs a script of it)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_directory(argv: list[str]) -> str:
    """The run directory from the command line, absolute."""
    return os.path.abspath(os.path.expanduser(argv[0]))
