"""Does `spark-launch check` cost the same on 2, 4 and 8 nodes? (It fans out in parallel.)

Builds the test bed with N namespace nodes (real sshd each), writes the demo spec for N
nodes (tensor parallel N), and times `check` in fresh processes: without the probe (the
fan-out itself), and with it (each node's vLLM resolving its command: on the test bed all
nodes share this machine's cores, so the probe's own CPU time grows with N here, which it
would not across real machines). The launcher's own CPU time is printed too: the part
that is this process's fan-out, not the nodes' work. Needs root; restores the 2-node bed.

    python bench/check_fanout.py [--runs 3] [--probe-runs 1]
"""

from __future__ import annotations

import argparse
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


def timed_check(spec: Path, probe: bool) -> tuple[float, float]:
    """Wall seconds, and the launcher process's own CPU seconds, of one `spark-launch check`."""
    args = [sys.executable, "-m", "launcher", "check", str(spec), *([] if probe else ["--no-probe"])]
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
    results: dict[int, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for nodes in (2, 4, 8):
                bed(nodes)
                spec = spec_for(nodes, Path(tmp))
                runs = [timed_check(spec, False) for _ in range(args.runs)]
                fan, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
                probe = statistics.median(timed_check(spec, True)[0] for _ in range(args.probe_runs))
                results[nodes] = (fan, probe)
                print(
                    f"{nodes} nodes: check --no-probe {fan:5.2f} s wall, launcher CPU {cpu:4.2f} s "
                    f"(median of {args.runs}); with probe {probe:5.1f} s wall",
                    flush=True,
                )
        finally:
            bed(2)
    base_fan, base_probe = results[2]
    for nodes, (fan, probe) in results.items():
        ratio, probe_ratio = fan / base_fan, probe / base_probe
        print(f"ratio {nodes}/2 nodes: without probe {ratio:4.2f}x, with probe {probe_ratio:4.2f}x")


if __name__ == "__main__":
    main()
