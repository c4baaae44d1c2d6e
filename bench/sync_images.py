"""`spark-launch sync images` next to a plain `ssh node1 docker save | ssh node2 docker load`.

Both move the bed's test image (about 4 GB) from node1's engine to node2's through this
machine, from the same starting point: node2 holds another build under the same name (one
changed file on the same base layer, as after an update). Then the bare transport: the same
number of bytes from /dev/zero on node1 into /dev/null on node2, through spark-launch's SSH
relay (paramiko) and through two OpenSSH clients piped together, to show what the relay
itself costs. Needs root; holds the bed's session lock (waits for any test session).

    python bench/sync_images.py [--runs 1]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bed import BED, ROOT, bed_with_engines, cli, engine
from launcher.node.relay import copy_to_all
from launcher.node.ssh import SshExecutor

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


def sync() -> float:
    """Seconds of `spark-launch sync images`."""
    began = time.perf_counter()
    done = cli("sync", "images", SPEC)
    if done.returncode != 0:
        sys.exit(f"sync images failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - began


def transport(size: int) -> tuple[float, float]:
    """Seconds to move `size` bytes node1 -> node2: through the relay, and through OpenSSH."""
    source, sink = f"head -c {size} /dev/zero", "cat > /dev/null"
    executor = SshExecutor({"node1": "node1", "node2": "node2"}, str(BED / "ssh_config"))
    try:
        executor.connection("node1"), executor.connection("node2")  # connecting is not the stream
        began = time.perf_counter()
        relayed = copy_to_all(executor, "node1", source, {"node2": sink})
        relay = time.perf_counter() - began
        assert relayed.sent["node2"] == size, relayed
    finally:
        executor.close()
    began = time.perf_counter()
    first = subprocess.Popen([*SSH, "node1", source], stdout=subprocess.PIPE)
    subprocess.run([*SSH, "node2", sink], stdin=first.stdout, check=True)
    first.wait()
    return relay, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with bed_with_engines():
        size = int(engine("node1", "image", "inspect", "--format", "{{.Size}}", TAG).stdout)
        plain, ours = [], []
        for _ in range(args.runs):
            another_build_on_node2()
            plain.append(plain_pipe())
            assert same_image()
            another_build_on_node2()
            ours.append(sync())
            assert same_image()
            engine("node2", "image", "prune", "--force")
        relay, openssh = transport(size)
    gb = size / 1e9
    p, s = statistics.median(plain), statistics.median(ours)
    print(f"image {TAG}: {gb:.2f} GB, node1 -> node2, node2 holding another build under the name")
    print(f"  plain  ssh node1 docker save | ssh node2 docker load  {p:6.1f} s  {gb * 1e3 / p:6.0f} MB/s")
    print(f"  spark-launch sync images                               {s:6.1f} s  {gb * 1e3 / s:6.0f} MB/s")
    print(f"  sync images / plain pipe: {p / s:.2f} of the plain pipe's throughput")
    print(f"bare transport of {gb:.2f} GB, /dev/zero -> /dev/null:")
    print(f"  OpenSSH | OpenSSH      {openssh:6.1f} s  {gb * 1e3 / openssh:6.0f} MB/s")
    print(f"  spark-launch relay     {relay:6.1f} s  {gb * 1e3 / relay:6.0f} MB/s")


if __name__ == "__main__":
    main()
