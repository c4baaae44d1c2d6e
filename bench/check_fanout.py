"""Does `spark-launch check` cost the same on 2, 4 and 8 nodes? (It fans out in parallel.)

Builds the test bed with 8 namespace nodes (real sshd each) once, writes the demo spec for
2, 4 and 8 of them, answers each spec's probe once (`--fresh`: each node's vLLM resolving
its command, cached on the node), then times `check` in fresh processes, the sizes
alternating run by run (2, 4, 8, 2, 4, 8, ...) so that a change of load on the machine hits
them alike: warm with the probe and without the collective preflight (`--no-collective`:
every node answering from its caches, one round trip each), as `check` runs by default (the
probe and the preflight, whose all-reduce starts torch on every node each time: it proves the
fabric now, so it is never cached), and the fan-out alone (`--no-probe --no-collective`).
The launcher's own CPU time is printed too.
On the test bed all nodes share this machine's cores, so whatever each node computes adds
up here, which it would not across real machines. Targets: warm check within 2 s on 2
nodes, and within 1.5 times that on 8. Needs root; holds the bed's session lock; puts the
bed back to 2 nodes.

    python bench/check_fanout.py [--runs 5] [--cold]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "configs" / "demo.yaml"
LOCK = Path("/tmp/spark-launch-testbed.session.lock")
SIZES = (2, 4, 8)


def bed(nodes: int) -> None:
    """The test bed with `nodes` nodes."""
    subprocess.run(
        [sys.executable, "-m", "testbed", "up", "--nodes", str(nodes)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )


def spec_for(nodes: int, directory: Path) -> Path:
    """The demo spec spread over `nodes` nodes."""
    data = yaml.safe_load(DEMO.read_text())
    data["name"] = f"demo{nodes}"  # its own cluster: its own run directories and probe answers
    data["nodes"] = [
        {"name": f"node{i}", "ssh": f"node{i}", "address": f"10.99.0.{i}", "interface": "eth0"}
        for i in range(1, nodes + 1)
    ]
    # The tiny model has 2 KV heads: tensor parallel 2, and pipeline stages for the rest.
    data["serve"]["tensor_parallel_size"] = 2
    if nodes > 2:
        data["serve"]["pipeline_parallel_size"] = nodes // 2
    path = directory / f"demo-{nodes}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def timed_check(spec: Path, *flags: str) -> tuple[float, float]:
    """Wall seconds, and the launcher process's own CPU seconds, of one `spark-launch check`."""
    args = [sys.executable, "-m", "launcher", "check", str(spec), *flags]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"check failed on {spec.name}:\n{done.stdout}\n{done.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(specs: dict[int, Path], runs: int, cold: bool) -> dict[str, dict[int, list[float]]]:
    """Every measurement, the sizes alternating within each round."""
    out: dict[str, dict[int, list[float]]] = {
        k: {n: [] for n in specs} for k in ("warm", "gate", "fan", "cpu", "cold")
    }
    for nodes, spec in specs.items():  # each spec's probe answered once: the warm runs find it
        seconds = timed_check(spec, "--fresh")[0]
        if cold:
            out["cold"][nodes].append(seconds)
    for _ in range(runs):
        for nodes, spec in specs.items():
            out["warm"][nodes].append(timed_check(spec, "--no-collective")[0])
            out["gate"][nodes].append(timed_check(spec)[0])
            wall, cpu = timed_check(spec, "--no-probe", "--no-collective")
            out["fan"][nodes].append(wall)
            out["cpu"][nodes].append(cpu)
    return out


def main() -> None:
    """Measure and print one line per node count, plus the ratios to 2 nodes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="also print the cold probe's time per size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            bed(max(SIZES))
            specs = {n: spec_for(n, Path(tmp)) for n in SIZES}
            out = measure(specs, args.runs, args.cold)
            load = os.getloadavg()
        finally:
            bed(2)
    med = {k: {n: statistics.median(v) for n, v in by.items() if v} for k, by in out.items()}
    loads = " ".join(f"{x:.2f}" for x in load)
    print(f"check, median of {args.runs} alternating runs; load average after {loads}")
    for nodes in SIZES:
        cold = f", cold probe {med['cold'][nodes]:5.1f} s" if nodes in med["cold"] else ""
        each = " ".join(f"{t:.2f}" for t in out["warm"][nodes])
        print(
            f"{nodes} nodes: warm {med['warm'][nodes]:5.2f} s (runs {each}); "
            f"with the preflight {med['gate'][nodes]:5.2f} s; "
            f"fan-out alone {med['fan'][nodes]:5.2f} s, launcher CPU {med['cpu'][nodes]:4.2f} s{cold}"
        )
    for nodes in SIZES[1:]:
        print(
            f"ratio {nodes}/2 nodes: warm {med['warm'][nodes] / med['warm'][2]:4.2f}x, "
            f"with the preflight {med['gate'][nodes] / med['gate'][2]:4.2f}x, "
            f"fan-out alone {med['fan'][nodes] / med['fan'][2]:4.2f}x"
        )


if __name__ == "__main__":
    main()
