"""How fast `up` reports a rank that dies while the cluster starts, and how long `down` takes.

On the test bed (needs root and `make testbed`): `up --skip-check` of the demo; once node2 has
reached its rendezvous, its vLLM main process is killed (SIGKILL, as the kernel's OOM killer
would); measured: from the kill to up's line saying which rank exited, and to up's exit with
every node stopped. Then `up` again to healthy, and `down` timed. Holds the test bed's
session lock while it runs.

    python bench/rank_death.py [--runs 3] [--spec configs/demo.yaml]
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
LOCK = Path("/tmp/spark-launch-testbed.session.lock")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real spark-launch, in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def main_process(cluster: str, node: str) -> int:
    """The pid of the rank's vLLM main process: the child of our wrapper."""
    state = json.loads((Path.home() / f".spark-launch/{cluster}/{node}/state.json").read_text())
    children = Path(f"/proc/{state['pid']}/task/{state['pid']}/children").read_text().split()
    return int(children[0])


def one_death(spec: str, cluster: str) -> tuple[float, float]:
    """(seconds to the report line, seconds to up's exit) after killing node2's vLLM."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "up", spec, "--skip-check"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "node2: rendezvous" in line:
            break
    pid = main_process(cluster, "node2")
    subprocess.run(["kill", "-KILL", str(pid)], check=True)
    killed = time.perf_counter()
    reported = None
    for line in proc.stderr:
        if reported is None and "exited with status" in line:
            reported = time.perf_counter() - killed
    proc.wait()
    if reported is None:
        raise SystemExit("up never said which rank exited")
    return reported, time.perf_counter() - killed


def main() -> None:
    """Measure and print each run, then the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spec", default="configs/demo.yaml")
    args = parser.parse_args()
    cluster = json.loads(cli("plan", args.spec, "--json").stdout)["cluster"]
    reports, exits, downs = [], [], []
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cli("down", args.spec, "--grace", "5")
        for run in range(args.runs):
            report, done = one_death(args.spec, cluster)
            reports.append(report)
            exits.append(done)
            if cli("up", args.spec, "--skip-check").returncode != 0:
                raise SystemExit("up failed")
            began = time.perf_counter()
            cli("down", args.spec)
            downs.append(time.perf_counter() - began)
            print(
                f"run {run + 1}: death reported after {report:4.2f} s, up exited (all stopped) after "
                f"{done:4.1f} s; down of a serving cluster {downs[-1]:4.1f} s",
                flush=True,
            )
    print(
        f"median: report {statistics.median(reports):.2f} s, up's exit {statistics.median(exits):.1f} s, "
        f"down {statistics.median(downs):.1f} s"
    )


if __name__ == "__main__":
    main()
