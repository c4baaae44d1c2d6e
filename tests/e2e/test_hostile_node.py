"""A hostile node on the real test bed: node1's python3 forges the node scripts' answers.

node1's sshd puts a wrapper first on its PATH (SetEnv; `PYENV_VERSION=system` makes a pyenv
shim, if any, find it too): for a node script named in its folder it answers from there
(a forged answer, a flood of output, a forged relay request), else it runs the real python3.
The launcher must refuse each forgery naming node1, act on none of it (no command on the
target, nothing copied), and stay bounded and responsive under a flood. node1 is restored
after the module (sshd's environment as the bed sets it).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from launcher.node.executor import NodeError
from launcher.node.output import MAX_HTTP
from launcher.node.ssh import SshExecutor
from launcher.node.unit import unit_sha
from testbed.shards import write_sharded_model
from tests.conftest import ROOT
from tests.e2e.conftest import BED, DEMO, cli, only, spec_file
from tests.node_scripts import answer_of, run_script

pytestmark = pytest.mark.testbed

HOSTILE = Path("/tmp/spark-launch-hostile")  # the wrapper and what it forges (all nodes see /tmp)
PARENT = Path("/tmp/spark-launch-hostile-sync")  # the synced model's parent; node2 sees its own
MODEL = PARENT / "model"
NODE2 = Path("/tmp/spark-launch-hostile-node2")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
WRAPPER = f"""#!/bin/bash
# python3 on a hostile test node: forges what {HOSTILE} names, else the real python3 runs.
here={HOSTILE}
if [ "$1" = "--hostile" ]; then echo hostile; exit 0; fi
isolated=; if [ "$1" = "-S" ]; then isolated=-S; shift; fi   # node scripts run as python3 -S
# A node script runs as python3 -S -c STUB UNIT NAME DIR ARGS...
if [ "$1" = "-c" ] && [ "$4" = transfer ] && [ "$6" = send ] && [ -f "$here/relay.json" ]; then
    cat "$here/relay.json" >&2; cat > /dev/null; exit 0   # ask the relay, then hold the stream
fi
if [ "$1" = "-c" ] && [ -f "$here/$4.sh" ]; then cat > /dev/null; . "$here/$4.sh"; exit 0; fi
if [ "$1" = "-c" ] && [ -f "$here/$4.answer" ]; then cat > /dev/null; cat "$here/$4.answer"; exit 0; fi
exec /usr/bin/python3 $isolated "$@"
"""
MiB = 1 << 20


def run_bed(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "testbed", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def on_node(node: str, command: str) -> str:
    done = subprocess.run(
        ["ssh", "-F", str(BED / "ssh_config"), node, command], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def hostile(testbed: Path) -> Iterator[Path]:
    """node1 with the forging python3 first on its PATH; the bed's own environment again after."""
    (HOSTILE / "bin").mkdir(parents=True, exist_ok=True)
    (HOSTILE / "bin" / "python3").write_text(WRAPPER)
    (HOSTILE / "bin" / "python3").chmod(0o755)
    try:
        run_bed(
            "up",
            f"--node-env=node1:PATH={HOSTILE}/bin:{SYSTEM_PATH}",
            "--node-env=node1:PYENV_VERSION=system",
        )
        assert on_node("node1", "python3 --hostile") == "hostile"  # else nothing here could fail
        assert on_node("node2", "python3 --hostile; true") != "hostile"
        yield HOSTILE
    finally:
        run_bed("up")
        shutil.rmtree(HOSTILE, ignore_errors=True)
    assert on_node("node1", "python3 -c 'print(1)'") == "1"


@pytest.fixture
def forge(hostile: Path) -> Iterator[Callable[[str, str], None]]:
    """forge(name, text): node1's python3 answers with `text` (NAME.answer, NAME.sh, relay.json)."""
    written: list[Path] = []

    def write(name: str, text: str) -> None:
        path = hostile / name
        path.write_text(text)
        written.append(path)

    yield write
    for path in written:
        path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def model(hostile: Path) -> Iterator[Path]:
    """A small model on node1 (and the host); node2 gets its own empty view of its parent."""
    write_sharded_model(MODEL, BED / "model", 2, 1 << 20)
    shutil.rmtree(NODE2, ignore_errors=True)
    NODE2.mkdir()
    run_bed("bind", "node2", str(NODE2), str(PARENT))
    yield MODEL
    subprocess.run([sys.executable, "-m", "testbed", "unbind", "node2", str(PARENT)], cwd=ROOT, check=False)
    shutil.rmtree(NODE2, ignore_errors=True)
    shutil.rmtree(PARENT, ignore_errors=True)


@pytest.fixture
def spec(tmp_path: Path, model: Path) -> Path:
    return spec_file(tmp_path, model={"path": str(model)})


def sync(spec: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = cli("sync", "models", spec, "--json", *args, timeout=300)
    assert done.stdout.startswith("{"), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_forged_relay_request_runs_nothing_on_the_target(
    forge: Callable[[str, str], None], spec: Path
) -> None:
    """The source asks the relay for `rsync --server --version; touch MARKER`: refused, naming it."""
    marker = HOSTILE / "the-forged-command-ran"
    forged = ["rsync", "--server", "--version;", "touch", str(marker), ";", "#"]
    forge("relay.json", json.dumps({"event": "relay", "command": forged}) + "\n")
    code, result = sync(spec, "--relay")
    [node] = result["nodes"]
    assert not marker.exists(), "the forged command ran on node2"
    assert code == 1 and node["state"] == "failed"
    assert node["detail"].startswith(
        "node node1: asked the relay to run something else than the planned rsync receiver on node2"
    )
    assert "nothing was run on node2" in node["detail"]
    assert not marker.exists()


def manifest_answer(**files: list[Any]) -> str:
    """node1's manifest of MODEL as a forger writes it: complete, plus `files`."""
    real = {
        "config.json": [10, "ab" * 32],
        "tokenizer.json": [10, "cd" * 32],
        "model.safetensors": [10, "ef" * 32],
    }
    room = {"free": 1 << 40, "block": 4096, "at": str(MODEL), "writable": True, "unwritable": []}
    answer = {"ok": True, "path": str(MODEL), "exists": True, "room": room, "files": {**real, **files}}
    return json.dumps(answer) + "\n"


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({"../../../etc/hostname": [10, "ab" * 32]}, "is not a path inside the directory"),
        ({"a\x1b]0;owned\x07.safetensors": [10, "ab" * 32]}, "holds the control character '\\x1b'"),
        ({"huge.safetensors": [1 << 62, "ab" * 32]}, "is out of range"),
    ],
    ids=["dot-dot", "control-characters", "huge-size"],
)
def test_a_forged_source_manifest_is_refused_and_nothing_is_copied(
    forge: Callable[[str, str], None], spec: Path, files: dict[str, list[Any]], said: str
) -> None:
    forge("manifest.answer", manifest_answer(**files))
    done = cli("sync", "models", spec, timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "\n  node1: malformed answer from the node script manifest" in done.stderr and said in done.stderr
    assert not (NODE2 / "model").exists()  # not even prepared on the target


def facts_answer(tmp_path: Path, **vllm: Any) -> str:
    """node1's facts as a forger writes them: a real answer (the facts script run here), changed."""
    request = {"venv": str(BED / "vllm"), "interface": "eth0", "address": "10.99.0.1", "ports": []}
    where = tmp_path / "t" / "node1"
    answer = answer_of(run_script(tmp_path / "home", "check_facts", str(where), json.dumps(request)))
    answer["vllm"].update(vllm)
    return json.dumps(answer) + "\n"


@pytest.mark.parametrize(
    ("vllm", "said"),
    [
        ({"vllm_version": "0.32.0\x1b[2J"}, "vllm['vllm_version']: holds the control character '\\x1b'"),
        (
            {"vllm_files": {"files": 1, "hashed": 1, "differ": ["../../root/.ssh/id_rsa"]}},
            "is not a path inside",
        ),
        ({"vllm_binary": "yes"}, "expected true or false"),
    ],
    ids=["escape-in-version", "dot-dot-file", "wrong-type"],
)
def test_forged_facts_are_refused_naming_the_node(
    forge: Callable[[str, str], None], tmp_path: Path, vllm: dict[str, Any], said: str
) -> None:
    forge("check_facts.answer", facts_answer(tmp_path, **vllm))
    done = cli("check", spec_file(tmp_path), "--no-probe", timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr
    said_all = done.stdout + done.stderr  # the table (node1's column says why), then the verdict
    assert "malformed answer from the node script check_facts" in said_all and said in said_all
    assert "cannot reach 1 of 2 node(s) (node1)" in said_all


def measured(*args: str | Path, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """Run the CLI; its result, its seconds, and its own peak resident memory in MiB (wait4)."""
    began = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    outputs: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda k=k, f=f: outputs.__setitem__(k, f.read()), daemon=True)
        for k, f in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for reader in readers:
        reader.start()
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not every child's
    killer.cancel()
    for reader in readers:
        reader.join(10)
    seconds = time.monotonic() - began
    assert seconds < timeout, f"the launcher stalled: killed after {timeout} s"
    code = os.waitstatus_to_exitcode(status)
    done = subprocess.CompletedProcess(proc.args, code, outputs.get("out", ""), outputs.get("err", ""))
    return done, seconds, usage.ru_maxrss // 1024


FLOOD = 400 * MiB


@pytest.mark.parametrize(
    ("script", "said"),
    [
        (f"head -c {FLOOD} /dev/zero", "wrote more than 32 MiB on stdout"),
        (f"head -c {FLOOD} /dev/zero >&2; echo '{{}}'", "wrote more than 4 MiB on stderr"),
        (f"head -c {FLOOD} /dev/zero >&2 & head -c {FLOOD} /dev/zero; wait", "wrote more than"),
    ],
    ids=["stdout", "stderr", "both"],
)
def test_a_node_flooding_its_answer_is_refused_with_bounded_memory_and_no_stall(
    forge: Callable[[str, str], None], script: str, said: str
) -> None:
    forge("rank_status.sh", script + "\n")
    done, seconds, peak = measured("status", DEMO, "--json")
    print(f"\nflood ({said}): {seconds:.1f} s, launcher peak RSS {peak} MiB")
    [node1] = [n for n in only(done.stdout)["nodes"] if n["name"] == "node1"]
    assert not node1["reachable"] and said in node1["error"]
    assert peak < 200  # a 400 MB answer once took the launcher to 811 MB


def test_a_stream_flooding_stderr_is_refused_not_waited_on_forever(forge: Callable[[str, str], None]) -> None:
    """sync's manifest streams its progress; a flood on its stderr once stalled the stream for good."""
    forge("manifest.sh", f"head -c {FLOOD} /dev/zero >&2; sleep 600\n")
    done, seconds, peak = measured("sync", "models", DEMO, "--dry-run")
    print(f"\nstream flood: {seconds:.1f} s, launcher peak RSS {peak} MiB")
    said_all = done.stdout + done.stderr
    assert done.returncode == 4 and "more than 4 MiB on stderr" in said_all, said_all
    assert f"\n  node1: `python3 -S -c STUB {unit_sha()} manifest " in said_all, said_all
    assert peak < 200


# One request answered with SIZE bytes as HTTP/1.0 does (the connection ends with the body),
# then it exits (or after 60 s without one): nothing is left.
SERVER = """
import http.server, sys
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(SIZE))
        self.end_headers()
        for _ in range(SIZE // (1 << 20)):
            self.wfile.write(bytes(1 << 20))
server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
server.timeout = 60
print(server.server_address[1], flush=True)
server.handle_request()
"""


def http_answer(size: int) -> bytes:
    """GET from a server on node1 answering `size` bytes, through node1's SSH connection."""
    executor = SshExecutor({"node1": "node1"}, str(BED / "ssh_config"))
    try:
        server = executor.open("node1", f"python3 -c {shlex.quote(SERVER.replace('SIZE', str(size)))}")
        server.send_eof()
        port = int(server.recv(64).decode())
        try:
            return executor.http("node1", port, "GET", "/metrics", timeout=30).body
        finally:
            server.close()
    finally:
        executor.close()


def test_a_node_port_flooding_its_http_answer_is_refused(testbed: Path) -> None:
    """What `status`, `verify` and `up` read from the head's API is bounded too."""
    with pytest.raises(NodeError) as caught:
        http_answer(FLOOD)
    assert caught.value.node == "node1"
    assert f"answered more than {MAX_HTTP >> 20} MiB" in caught.value.message


def test_an_http_answer_that_ends_the_connection_is_read_whole(testbed: Path) -> None:
    """An HTTP/1.0 answer once lost all but what had arrived when http.client closed the tunnel."""
    assert http_answer(16 * MiB) == bytes(16 * MiB)
