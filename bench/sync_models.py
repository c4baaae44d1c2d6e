"""How fast is `spark-launch sync models` next to a plain `rsync -a` of the same tree, and how
long does it take to confirm a node that is already up to date?

On the test bed (node1 -> node2 over the bridge, each node's sshd in its own namespaces):
a generated model (safetensors shards of random bytes and their index) on node1, node2
seeing its own empty directory in its place (a bind mount in its mount namespace). Both
copies run from node1 to node2's address with the same remote shell, alternately (plain,
sync, plain, sync, ...), page cache warm, node2's copy removed before each:

  plain    ssh node1 'rsync -a MODEL/ 10.99.0.2:MODEL/' (the remote shell as configured:
           OpenSSH's own cipher order, chacha20-poly1305 first)
  gcm      the same, its remote shell given the ciphers sync gives it (AES-GCM first): the
           copy as fast as sync makes it, so that sync's own overhead shows
  sync     spark-launch sync models SPEC: the whole command (its manifests, plans, lock,
           SSH to both nodes, rsync, and node2's manifest after the copy, which must equal
           the source's)

The source's manifest is cached first (its cold hash time is printed: once per model).
Then "confirm": `sync models` against an identical node2, on models of two sizes, to show
that once the manifests are cached it costs the same whatever the size. Needs root and
the test bed; takes the bed's session lock. About 2 GB of disk while it runs.

The medians, the ratios of the throughputs (target: >= 0.9 of plain; and against gcm), what
sync adds around its rsync (its fixed cost: a fresh process, SSH to both nodes, the lock),
and the load average.

    python bench/sync_models.py [--gb 1.0] [--runs 3]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from testbed.shards import write_sharded_model  # noqa: E402

BED = Path("/tmp/spark-launch-testbed")
PARENT = Path("/tmp/spark-launch-bench-sync")
MODEL = PARENT / "model"
NODE2 = Path("/tmp/spark-launch-bench-sync-node2")
SESSION_LOCK = Path("/tmp/spark-launch-testbed.session.lock")
SSH = ["ssh", "-F", str(BED / "ssh_config")]


def testbed(*args: str) -> None:
    """Run `python -m testbed ARGS`."""
    subprocess.run([sys.executable, "-m", "testbed", *args], cwd=ROOT, check=True, capture_output=True)


def spec(directory: Path) -> Path:
    """The demo spec with the generated model."""
    data = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    data["model"]["path"] = str(MODEL)
    path = directory / "bench-sync.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def timed(argv: list[str]) -> tuple[float, str]:
    """Wall seconds of a command that must succeed, and its stdout."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")
    return seconds, done.stdout


def plain_rsync(ciphers: str | None = None) -> float:
    """rsync -a of the tree, node1 to node2, through the remote shell configured there (given
    `ciphers` if any)."""
    command = f"rsync -a {MODEL}/ 10.99.0.2:{MODEL}/"
    if ciphers:
        command = f'rsync -a -e "$RSYNC_RSH -o Ciphers={ciphers}" {MODEL}/ 10.99.0.2:{MODEL}/'
    return timed([*SSH, "node1", command])[0]


def gcm_first() -> str:
    """The cipher list sync models gives node1's remote shell for node2 (AES-GCM first)."""
    probe = "import sys; sys.path.insert(0, 'launcher/node/scripts'); import rsh; " + (
        "w = rsh.remote_shell({'default_rsh': 'ssh'}); print(rsh.fast_shell(w, '10.99.0.2')[2])"
    )
    out = subprocess.run(
        [*SSH, "node1", f"cd {ROOT} && python3 -S -c {shlex.quote(probe)}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return out.removeprefix("Ciphers=")


def sync(spec_path: Path) -> tuple[float, dict[str, object]]:
    """One `spark-launch sync models --json`: wall seconds and its result."""
    seconds, out = timed([sys.executable, "-m", "launcher", "sync", "models", str(spec_path), "--json"])
    return seconds, json.loads(out)


def fresh_target() -> None:
    """node2 without the model (its own directory, not the source's)."""
    shutil.rmtree(NODE2 / "model", ignore_errors=True)


def throughput(spec_path: Path, size: int, runs: int, ciphers: str) -> dict[str, float]:
    """Plain rsync, with AES-GCM first and sync models, alternately (plain, gcm, sync, plain,
    ...), each onto an empty node2; medians, and the ratios of the throughputs (the target:
    >= 0.9 of plain)."""
    plain, gcm, whole, copying, hashed = [], [], [], [], []
    for run in range(runs):
        fresh_target()
        plain.append(plain_rsync())
        fresh_target()
        gcm.append(plain_rsync(ciphers))
        fresh_target()
        seconds, result = sync(spec_path)
        node = result["nodes"][0]  # type: ignore[index]
        assert node["state"] == "copied", node
        whole.append(seconds)
        copying.append(node["copy_seconds"])
        hashed.append(node.get("hashed_bytes", -1))
        print(
            f"run {run + 1}: plain rsync {plain[-1]:.2f} s, with AES-GCM first {gcm[-1]:.2f} s, "
            f"sync models {whole[-1]:.2f} s",
            flush=True,
        )
    p, g, w = statistics.median(plain), statistics.median(gcm), statistics.median(whole)
    return {
        "plain_rsync_s": p,
        "gcm_rsync_s": g,
        "sync_models_s": w,
        "sync_rsync_part_s": statistics.median(copying),
        "sync_overhead_s": w - statistics.median(copying),
        "target_hashed_bytes": max(hashed),
        "plain_MBps": size / p / 1e6,
        "sync_MBps": size / w / 1e6,
        "ratio": p / w,
        "ratio_to_gcm": g / w,
    }


def confirm(spec_path: Path, runs: int) -> float:
    """Median wall seconds of `sync models` finding node2 identical (manifests cached)."""
    sync(spec_path)  # node2's copy hashed once (it was just written by rsync: verified and cached)
    times = []
    for _ in range(runs + 1):
        seconds, result = sync(spec_path)
        assert result["nodes"][0]["state"] == "identical", result  # type: ignore[index]
        times.append(seconds)
    return statistics.median(times)


def model_of(size: float) -> int:
    """(Re)write the model with 8 shards totalling `size` bytes; its size on disk."""
    write_sharded_model(MODEL, BED / "model", 8, int(size / 8))
    return sum(p.stat().st_size for p in MODEL.iterdir())


def main() -> None:
    """Run the benchmark and print the numbers (also as JSON on the last line)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="model size for the throughput runs")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with SESSION_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the bed is shared: one session at a time
        run(args.gb, args.runs)


def run(gb: float, runs: int) -> None:
    """The measurements, on a bed this process holds."""
    testbed("up")
    ciphers = gcm_first()
    NODE2.mkdir(parents=True, exist_ok=True)
    PARENT.mkdir(parents=True, exist_ok=True)
    testbed("bind", "node2", str(NODE2), str(PARENT))
    out: dict[str, object] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            spec_path = spec(Path(tmp))
            size = model_of(gb * 1e9)
            fresh_target()
            cold, _ = timed([sys.executable, "-m", "launcher", "sync", "models", str(spec_path), "--dry-run"])
            out["model_bytes"] = size
            out["cold_manifest_dry_run_s"] = cold
            out["gcm_ciphers"] = ciphers
            out.update(throughput(spec_path, size, runs, ciphers))
            out[f"confirm_{size / 1e9:.2f}GB_s"] = confirm(spec_path, runs)
            small = model_of(gb * 1e9 / 8)
            fresh_target()
            sync(spec_path)
            out[f"confirm_{small / 1e9:.2f}GB_s"] = confirm(spec_path, runs)
    finally:
        testbed("unbind", "node2", str(PARENT))
        shutil.rmtree(PARENT, ignore_errors=True)
        shutil.rmtree(NODE2, ignore_errors=True)
    out["load_average"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for key, value in out.items():
        print(f"{key:<28} {value:.2f}" if isinstance(value, float) else f"{key:<28} {value}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
