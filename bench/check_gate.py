"""What the host rows and the collective preflight add to `spark-launch check` on the test bed.

Times, in fresh processes: `check --no-probe --no-collective` (the fan-out, host facts
included) against `check --no-probe` (plus the preflight: every connection vLLM opens, then a
timed gloo all-reduce); the same pair with the probe on (the default: each node's vLLM
resolving its command alongside, from its cache once warm); the host facts' own cost on a
node (what hostinfo.host_details adds to the facts call each node answers, in parallel); and
the all-reduce's figures (latency of 4 bytes, bus bandwidth of 16 MiB) as the preflight
measured them. Needs root; holds the bed's session lock.

    python bench/check_gate.py [--runs 5]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "configs" / "demo.yaml"
LOCK = Path("/tmp/spark-launch-testbed.session.lock")
HOST_FACTS = (
    "import sys, time; sys.path.insert(0, {root!r})\n"
    "from launcher.node.scripts.hostinfo import host_details\n"
    "t = time.perf_counter()\n"
    "for _ in range({n}): host_details({{'interface': 'eth0', 'hcas': []}}, None)\n"
    "print((time.perf_counter() - t) / {n})\n"
)


def timed(*flags: str) -> tuple[float, dict[str, object]]:
    """Wall seconds of one `check --json` in a fresh process, and its report."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "check", str(DEMO), "--json", *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"check {' '.join(flags)} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    report: dict[str, object] = json.loads(done.stdout)
    return took, report


def host_facts_seconds(runs: int) -> float:
    """Seconds one host_details() takes on node1, as the facts script calls it."""
    code = HOST_FACTS.format(root=str(ROOT), n=runs)
    done = subprocess.run(
        ["ip", "netns", "exec", "sl-node1", "python3", "-c", code], capture_output=True, text=True, check=True
    )
    return float(done.stdout.strip())


def figures(report: dict[str, object]) -> dict[str, str]:
    rows = report["rows"]
    assert isinstance(rows, list)
    return next(r["values"] for r in rows if str(r["item"]).startswith("gloo all-reduce"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "-m", "testbed", "up"], cwd=ROOT, check=True, capture_output=True)
        down = [sys.executable, "-m", "launcher", "down", str(DEMO)]
        subprocess.run(down, cwd=ROOT, capture_output=True, check=False)
        timed("--no-probe")  # warm the page cache (torch's files) once
        without = [timed("--no-probe", "--no-collective")[0] for _ in range(args.runs)]
        runs = [timed("--no-probe") for _ in range(args.runs)]
        timed()  # the probe's cache filled
        probed_without = [timed("--no-collective")[0] for _ in range(args.runs)]
        probed = [timed()[0] for _ in range(args.runs)]
        facts = host_facts_seconds(20)
    with_collective = [t for t, _ in runs]
    base, full = statistics.median(without), statistics.median(with_collective)
    print(f"check --no-probe --no-collective: median {base:.2f} s  {_all(without)}")
    print(f"check --no-probe (collective)   : median {full:.2f} s  {_all(with_collective)}")
    print(f"  the collective preflight adds : {full - base:.2f} s")
    probed_base, probed_full = statistics.median(probed_without), statistics.median(probed)
    print(f"check --no-collective (probe)   : median {probed_base:.2f} s  {_all(probed_without)}")
    print(f"check (probe and collective)    : median {probed_full:.2f} s  {_all(probed)}")
    print(f"  the collective preflight adds : {probed_full - probed_base:.2f} s (beside the probe)")
    print(f"host facts on a node            : {facts * 1000:.1f} ms per call (each node, in parallel)")
    for _, report in runs:
        print(f"  gloo all-reduce (latency of 4 bytes, bus bandwidth of 16 MiB): {figures(report)}")


def _all(values: list[float]) -> str:
    return "(" + ", ".join(f"{v:.2f}" for v in values) + ")"


if __name__ == "__main__":
    main()
