"""What `up` costs over the least a person could do: start the same commands, wait until it serves.

On the test bed (needs root and `make testbed`), alternating: `spark-launch up --skip-check`
until it serves (/health, then one completed token), then a plain script that starts the
plan's exact command on every node over ssh in parallel (setsid, nohup, the same
environment), polls the head's /health every 0.2 s from here, then asks for the same one
token. Between runs the cluster is stopped.

Twice: with the bed's own login shells (no start-up file), then with a slow one: a second sshd
per node whose every command's shell first spends `--bashrc` seconds of CPU, as a .bashrc with
pyenv's or conda's init does on many real nodes (bench/slow_shell.py; the bed's own sshd, which
the tests use, is left as it is). The person pays that once per node; `up` once per command it
sends, so the second ratio shows what `up`'s round trips cost. With the slow shells it also
counts the SSH connections `up` opened and the commands it sent to each node.

Prints each run, the medians and the ratios (target: within 1.1x with the slow shells). Holds
the test bed's session lock while it runs.

    python bench/up_overhead.py [--runs 3] [--spec configs/demo.yaml] [--bashrc 0.3] [--shells plain,bashrc]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import shlex
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import slow_shell
from bench.bed import BED, ROOT, SESSION_LOCK, cli

MARK = "SPARK_LAUNCH_BENCH_BY_HAND"
SHELLS = ("plain", "bashrc")


@dataclass
class Tally:
    """One kind of login shell's runs: seconds each way, and what `up` sent to each node."""

    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    sent: list[dict[str, tuple[int, int]]] = field(default_factory=list)  # node: (connections, commands)

    def line(self, name: str) -> str:
        """Medians and their ratio."""
        a, b = statistics.median(self.ours), statistics.median(self.theirs)
        return f"{name:6}: up --skip-check {a:.1f} s, by hand {b:.1f} s; ratio {a / b:.2f}x"


def sent_so_far() -> dict[str, tuple[int, int]]:
    """Connections accepted and commands started by each slow sshd so far."""
    return {n: (slow_shell.connections(n), slow_shell.commands(n)) for n in slow_shell.NODES}


def with_spark_launch(spec: str, ssh_config: Path) -> tuple[float, dict[str, tuple[int, int]]]:
    """Seconds from `up --skip-check` to its return with the head serving; what it sent each node."""
    before = sent_so_far()
    began = time.perf_counter()
    done = cli("up", spec, "--skip-check", "--ssh-config", ssh_config)
    seconds = time.perf_counter() - began
    after = sent_so_far()
    if done.returncode != 0:
        raise SystemExit(f"up failed:\n{done.stderr}")
    cli("down", spec, "--grace", "5", "--ssh-config", ssh_config)
    sent = {n: (after[n][0] - before[n][0], after[n][1] - before[n][1]) for n in after}
    return seconds, sent


def by_hand(plan: dict[str, Any], ssh_config: Path) -> float:
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
            ["ssh", "-F", str(ssh_config), node["name"], line], capture_output=True, text=True, check=False
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
            subprocess.run(["ssh", "-F", str(ssh_config), name, stop], check=False)


@contextlib.contextmanager
def shells(kind: str, bashrc: float) -> Iterator[Path]:
    """The ssh_config reaching the nodes with this kind of login shell."""
    if kind == "plain":
        yield BED / "ssh_config"
        return
    with slow_shell.slow_shells(bashrc) as config:
        yield config


def measure(kind: str, args: argparse.Namespace, plan: dict[str, Any]) -> Tally:
    """Alternate the two ways with this kind of login shell; print each run."""
    tally = Tally()
    with shells(kind, args.bashrc) as ssh_config:
        cli("down", args.spec, "--grace", "5", "--ssh-config", ssh_config)
        for run in range(args.runs):
            seconds, sent = with_spark_launch(args.spec, ssh_config)
            tally.ours.append(seconds)
            tally.sent.append(sent)
            tally.theirs.append(by_hand(plan, ssh_config))
            counted = (
                "; sent " + ", ".join(f"{n}: {c} conn, {k} commands" for n, (c, k) in sent.items())
                if kind != "plain"
                else ""
            )
            print(
                f"{kind} run {run + 1}: up --skip-check {tally.ours[-1]:6.1f} s, "
                f"by hand {tally.theirs[-1]:6.1f} s{counted}",
                flush=True,
            )
    return tally


def main() -> None:
    """Both kinds of login shell in turn: each run, then the medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--spec", default="configs/demo.yaml")
    parser.add_argument("--bashrc", type=float, default=0.3, help="CPU seconds of the slow shell's start")
    parser.add_argument("--shells", default=",".join(SHELLS), help="plain, bashrc or both (comma-separated)")
    args = parser.parse_args()
    kinds = [k for k in args.shells.split(",") if k]
    if not kinds or any(k not in SHELLS for k in kinds):
        parser.error(f"--shells takes {', '.join(SHELLS)}")
    (plan,) = json.loads(cli("plan", args.spec, "--json").stdout)["deployments"]
    tallies = {}
    with SESSION_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        up = [sys.executable, "-m", "testbed", "up"]
        bed = subprocess.run(up, cwd=ROOT, capture_output=True, text=True, check=False)
        if bed.returncode != 0:
            raise SystemExit(f"testbed up failed:\n{bed.stderr}")
        for kind in kinds:
            tallies[kind] = measure(kind, args, plan)
    print(f"median (of {args.runs} runs each):")
    for kind, tally in tallies.items():
        print("  " + tally.line(kind))


if __name__ == "__main__":
    main()
