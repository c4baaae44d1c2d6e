"""Does `spark-launch check` cost the same on 2, 4 and 8 nodes? (It fans out in parallel.)

Builds the test bed with N namespace nodes (real sshd each), writes the demo spec for N
nodes, and times `check` in fresh processes, side by side: without the probe (the fan-out
itself), with it cold (`--fresh`: each node's vLLM resolving its command; on the test bed
all nodes share this machine's cores, so this grows with N here, which it would not across
real machines) and with it warm (each node answering from its probe cache). The launcher's
own CPU time is printed too. Needs root; holds the bed's session lock; restores 2 nodes.

    python bench/check_fanout.py [--runs 3] [--probe-runs 1]
"""

from __future__ import annotations

import argparse
import fcntl
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


def main() -> None:
    """Measure and print one line per node count, plus the ratios to 2 nodes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--probe-runs", type=int, default=1)
    args = parser.parse_args()
    results: dict[int, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for nodes in (2, 4, 8):
                bed(nodes)
                spec = spec_for(nodes, Path(tmp))
                runs = [timed_check(spec, "--no-probe") for _ in range(args.runs)]
                fan, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
                cold = statistics.median(timed_check(spec, "--fresh")[0] for _ in range(args.probe_runs))
                warm = statistics.median(timed_check(spec)[0] for _ in range(args.runs))
                results[nodes] = (fan, cold, warm)
                print(
                    f"{nodes} nodes: check --no-probe {fan:5.2f} s wall, launcher CPU {cpu:4.2f} s; "
                    f"with the probe cold {cold:5.1f} s, warm {warm:5.2f} s (warm/cold {warm / cold:.2f})",
                    flush=True,
                )
        finally:
            bed(2)
    base = results[2]
    for nodes, times in results.items():
        ratios = ", ".join(
            f"{name} {t / b:4.2f}x"
            for name, t, b in zip(("no probe", "cold", "warm"), times, base, strict=True)
        )
        print(f"ratio {nodes}/2 nodes: {ratios}")


if __name__ == "__main__":
    main()
