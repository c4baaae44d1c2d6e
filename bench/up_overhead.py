"""What `up` costs over the least a person could do: start the same commands, wait until it serves.

On the test bed (needs root and `make testbed`), alternating: `spark-launch up --skip-check`
until it serves (/health, then one completed token), then a plain script that starts the
plan's exact command on every node over ssh in parallel (setsid, nohup, the same
environment), polls the head's /health every 0.2 s from here, then asks for the same one
token. Between runs the cluster is stopped. Prints each run, the medians and the
ratio (target: within 1.1x). Holds the test bed's session lock while it runs.

    python bench/up_overhead.py [--runs 3] [--spec configs/demo.yaml]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import shlex
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOCK = Path("/tmp/spark-launch-testbed.session.lock")
MARK = "SPARK_LAUNCH_BENCH_BY_HAND"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real spark-launch, in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "launcher", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def with_spark_launch(spec: str) -> float:
    """Seconds from `up --skip-check` to its return with the head serving."""
    began = time.perf_counter()
    done = cli("up", spec, "--skip-check")
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"up failed:\n{done.stderr}")
    cli("down", spec, "--grace", "5")
    return seconds


def by_hand(spec: str, plan: dict[str, Any], ssh_config: str) -> float:
    """Seconds from starting the plan's commands by hand to the head's first completed token."""
    head = plan["nodes"][0]
    argv = head["argv"]
    model = argv[argv.index("serve") + 1]
    named = argv.index("--served-model-name") + 1 if "--served-model-name" in argv else None
    served = argv[named] if named else model
    url = f"http://{head['address']}:{next(a for a in head['argv'] if a.startswith('--port=')).split('=')[1]}"

    def start(node: dict[str, Any]) -> str:
        env = {**node["env"], MARK: "1"}  # every process of this run carries it: stopped by it
        words = ["env", *(f"{k}={v}" for k, v in env.items()), *node["argv"]]
        inner = shlex.join(["bash", "-c", f"exec {shlex.join(words)}"])
        line = f"cd /tmp; setsid nohup {inner} > /tmp/by-hand-{node['name']}.log 2>&1 < /dev/null & echo $!"
        out = subprocess.run(
            ["ssh", "-F", ssh_config, node["name"], line], capture_output=True, text=True, check=False
        )
        return out.stdout.strip()

    began = time.perf_counter()
    with ThreadPoolExecutor(len(plan["nodes"])) as pool:
        pids = dict(zip([n["name"] for n in plan["nodes"]], pool.map(start, plan["nodes"]), strict=True))
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        time.sleep(0.2)
    body = json.dumps({"model": served, "prompt": "hello", "max_tokens": 1}).encode()
    ask = urllib.request.Request(url + "/v1/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(ask, timeout=600) as answer:
            answer.read()
        return time.perf_counter() - began
    finally:
        # vLLM's workers drop the marker from their environment: stop whole sessions instead.
        marked = f"grep -l {MARK}=1 /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3"
        sessions = f"s=$(for p in $({marked}); do ps -o sid= -p $p; done | sort -u)"
        kill = "for x in $s; do pkill -{} -s $x; done"
        stop = f"{sessions}; {kill.format('TERM')}; sleep 6; {kill.format('KILL')}; true"
        for name in pids:
            subprocess.run(["ssh", "-F", ssh_config, name, stop], check=False)


def main() -> None:
    """Alternate the two ways, print each run, the medians and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spec", default="configs/demo.yaml")
    args = parser.parse_args()
    (plan,) = json.loads(cli("plan", args.spec, "--json").stdout)["deployments"]
    ssh_config = str(Path("/tmp/spark-launch-testbed/ssh_config"))
    ours, theirs = [], []
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cli("down", args.spec, "--grace", "5")
        for run in range(args.runs):
            ours.append(with_spark_launch(args.spec))
            theirs.append(by_hand(args.spec, plan, ssh_config))
            print(
                f"run {run + 1}: up --skip-check {ours[-1]:6.1f} s, by hand {theirs[-1]:6.1f} s", flush=True
            )
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"median: up --skip-check {a:.1f} s, by hand {b:.1f} s; ratio {a / b:.2f}x")


if __name__ == "__main__":
    main()
