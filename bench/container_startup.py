"""`up` to healthy on the test bed: the venv runtime next to the docker runtime, same bed, back to back.

For each runtime: `down`, then `up --json` (its check, with the probe, included), then
`down`; the runtimes alternate run by run (venv, docker, venv, docker, ...). The first `up`
of each runtime is not counted: it answers the probe cold (once per change of the image or
the command; every later `up` finds the answer in the node's cache, as an operator's does).
Prints each run, the wall time of the whole `up` and the part `up` itself measures (from
starting the ranks until the head's /health answers), the ratio docker/venv (target:
within 1.15) and the load average. The model and vLLM build are the same; the container
runs the same venv from the image's own copy. Needs root; holds the bed's session lock
(waits for any test session) and starts the engines if needed.

    python bench/container_startup.py [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bed import ROOT, bed_with_engines, cli

SPECS = {"venv": ROOT / "configs" / "demo.yaml", "docker": ROOT / "configs" / "demo-docker.yaml"}


def one_up(spec: Path) -> tuple[float, float]:
    """(wall seconds of `up`, seconds `up` reports from start to healthy); the cluster stopped after."""
    cli("down", spec, "--grace", "5")
    began = time.perf_counter()
    done = cli("up", spec, "--json")
    wall = time.perf_counter() - began
    cli("down", spec, "--grace", "5")
    if done.returncode != 0:
        sys.exit(f"up {spec.name} failed:\n{done.stderr}")
    (one,) = json.loads(done.stdout)["deployments"]
    return wall, float(one["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in SPECS}
    with bed_with_engines():
        for name, spec in SPECS.items():  # the probe answered once: what every later `up` finds
            wall, _ = one_up(spec)
            print(f"first {name} up (probe cold, not counted): {wall:.1f} s", flush=True)
        for run in range(args.runs):
            for name, spec in SPECS.items():
                results[name].append(one_up(spec))
                print(f"run {run + 1} {name}: up {results[name][-1][0]:.1f} s", flush=True)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"up to healthy on the test bed, median of {args.runs} alternating run(s); load average {load}:")
    walls = {}
    for name, runs in results.items():
        walls[name] = statistics.median(w for w, _ in runs)
        start = statistics.median(s for _, s in runs)
        print(f"  {name:<7} up (check + start) {walls[name]:6.1f} s   start -> healthy {start:6.1f} s")
    print(f"  docker / venv: {walls['docker'] / walls['venv']:.2f}")


if __name__ == "__main__":
    main()
