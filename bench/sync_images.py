"""`spark-launch sync images` next to a plain `ssh node1 docker save | ssh node2 docker load`.

Each moves the bed's test image (about 4 GB) from node1's engine to node2's, from the same
starting point: node2 holds another build under the same name (one changed file on the same
base layer, as after an update). The sides alternate within each run: the plain OpenSSH pipe
through this machine, `sync images` (node to node: OpenSSH on node1 straight to node2's
address), and `sync images --relay` (through this machine's paramiko connections, for nodes
that cannot reach each other). Prints each run, the medians, the load average and the
ratios (target: `sync images` at >= 0.95 of the plain pipe's throughput). Needs root; holds
the bed's session lock (waits for any test session).

    python bench/sync_images.py [--runs 2] [--no-relay]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bed import BED, ROOT, bed_with_engines, cli, engine

SPEC = ROOT / "configs" / "demo-docker.yaml"
TAG = "spark-launch-testbed/vllm-cpu:0.32.0"
SSH = ["ssh", "-F", str(BED / "ssh_config")]


def another_build_on_node2() -> None:
    """node2's TAG becomes a different image: the head's plus one small file."""
    engine("node2", "create", "--name", "bench-variant", "--network", "none", TAG)
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(str(time.time()))
            f.flush()
            engine("node2", "cp", f.name, "bench-variant:/etc/bench-variant")
        engine("node2", "commit", "bench-variant", TAG)
    finally:
        engine("node2", "rm", "--force", "bench-variant")


def same_image() -> bool:
    ids = [
        engine(n, "image", "inspect", "--format", "{{.Id}}", TAG).stdout.strip() for n in ("node1", "node2")
    ]
    return ids[0] == ids[1]


def plain_pipe() -> float:
    """Seconds of `ssh node1 docker save TAG | ssh node2 docker load`."""
    began = time.perf_counter()
    save = subprocess.Popen([*SSH, "node1", f"docker save {TAG}"], stdout=subprocess.PIPE)
    subprocess.run([*SSH, "node2", "docker load"], stdin=save.stdout, check=True, capture_output=True)
    save.wait()
    return time.perf_counter() - began


def sync(*flags: str) -> float:
    """Seconds of `spark-launch sync images`."""
    began = time.perf_counter()
    done = cli("sync", "images", SPEC, *flags)
    if done.returncode != 0:
        sys.exit(f"sync images failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--no-relay", action="store_true", help="leave out `sync images --relay`")
    args = parser.parse_args()
    sides: dict[str, Callable[[], float]] = {"plain": plain_pipe, "sync": sync}
    if not args.no_relay:
        sides["relay"] = lambda: sync("--relay")
    times: dict[str, list[float]] = {name: [] for name in sides}
    with bed_with_engines():
        size = int(engine("node1", "image", "inspect", "--format", "{{.Size}}", TAG).stdout)
        for run in range(args.runs):
            for name, side in sides.items():
                another_build_on_node2()
                times[name].append(side())
                assert same_image(), name
                engine("node2", "image", "prune", "--force")
            print(f"run {run + 1}: " + ", ".join(f"{n} {t[-1]:.1f} s" for n, t in times.items()), flush=True)
        load = os.getloadavg()
    gb = size / 1e9
    plain = statistics.median(times["plain"])
    print(f"image {TAG}: {gb:.2f} GB, node1 -> node2, node2 holding another build under the name")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load)}")
    labels = {
        "plain": "plain  ssh node1 docker save | ssh node2 docker load",
        "sync": "spark-launch sync images (node to node)",
        "relay": "spark-launch sync images --relay",
    }
    for name, runs in times.items():
        median = statistics.median(runs)
        print(
            f"  {labels[name]:<54} {median:6.1f} s  {gb * 1e3 / median:6.0f} MB/s  "
            f"{plain / median:4.2f} of the plain pipe's throughput"
        )


if __name__ == "__main__":
    main()
