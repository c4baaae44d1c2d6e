"""How long does `spark-launch init` take on 2 and on 8 nodes? (It asks every node at once.)

Builds the test bed with N namespace nodes (real sshd each) and times `init --hosts
node1,...,nodeN` with the bed's model and venv in fresh processes: every node's discover
script (interfaces, sysfs, nvidia-smi, a fingerprint of the vLLM package, the model) and the
link trial (a listener on the head, a TCP connection from every worker). On the bed all
nodes share this machine's cores, so the nodes' own work grows with N here, which it would
not across real machines; the launcher's own CPU time is printed too. Needs root; holds the
bed's session lock while it runs, and restores the 2-node bed.

    python bench/init_fanout.py [--runs 3] [--nodes 2 8]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BED = Path("/tmp/spark-launch-testbed")
LOCK = Path("/tmp/spark-launch-testbed.session.lock")


def bed(nodes: int) -> None:
    """The test bed with `nodes` nodes."""
    subprocess.run(
        [sys.executable, "-m", "testbed", "up", "--nodes", str(nodes)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )


def timed_init(nodes: int, output: Path) -> tuple[float, float, dict[str, object]]:
    """Wall seconds, the launcher's own CPU seconds, and init's JSON summary."""
    hosts = ",".join(f"node{i}" for i in range(1, nodes + 1))
    args = [
        *(sys.executable, "-m", "launcher", "init", "--hosts", hosts, "--force", "--json"),
        *("--ssh-config", str(BED / "ssh_config"), "-o", str(output)),
        *("--model", str(BED / "model"), "--venv", str(BED / "vllm")),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 2):
        raise SystemExit(f"init failed on {nodes} nodes:\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, json.loads(done.stdout)


def main() -> None:
    """Measure and print one line per node count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 8])
    args = parser.parse_args()
    with LOCK.open("a") as handle, tempfile.TemporaryDirectory() as tmp:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            for nodes in args.nodes:
                bed(nodes)
                runs = [timed_init(nodes, Path(tmp) / f"init-{nodes}.yaml") for _ in range(args.runs)]
                wall = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                summary = runs[-1][2]
                each = ", ".join(f"{r[0]:.2f}" for r in runs)
                print(
                    f"{nodes} nodes: init {wall:5.2f} s wall (runs: {each}), "
                    f"launcher CPU {cpu:4.2f} s, ready={summary['ready']}",
                    flush=True,
                )
        finally:
            bed(2)


if __name__ == "__main__":
    main()
