"""Cold-start time of `spark-launch plan` on the example specs, as a user runs it.

Each run is a fresh process; the cases alternate run by run (a bare `python -c pass`, then
each command), so a change of load on the machine hits them all alike. Bytecode is written
first (an installed package has it; with PYTHONDONTWRITEBYTECODE set, every run would
compile the launcher again), and the first round is not counted. Prints the median and the
best of N runs and the ratio to the bare start (target: `plan` within 3 times it). Also the
floor under any `plan`: the same interpreter importing only the libraries it needs (and PyYAML
alone). With `--against DIR` (another checkout, e.g. main's), each command also runs
from DIR's code in the same rounds: before and after, side by side. With `--python PY` (a venv
where spark-launch is installed as a package, `pip install .`, as operators have it), every case
runs with that interpreter from outside the source tree: a bare start there loads no editable
install's finder, so the same `plan` is a larger multiple of it.

    python bench/plan_startup.py [--runs 20] [--against DIR | --python VENV/bin/python]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commands(python: str, configs: Path) -> dict[str, list[str]]:
    """Every case's argv, run by `python`, the specs read from `configs`."""
    launcher = [python, "-m", "launcher"]
    return {
        "python -c pass": [python, "-c", "pass"],
        "import yaml": [python, "-c", "import yaml"],
        "libraries only": [python, "-c", "import dataclasses, json, shlex, yaml"],
        "plan demo.yaml": [*launcher, "plan", str(configs / "demo.yaml")],
        "plan qwen3-next --json": [*launcher, "plan", str(configs / "qwen3-next-2x-spark.yaml"), "--json"],
        "validate dense": [*launcher, "validate", str(configs / "dense-2x-spark.yaml")],
        "--help": [*launcher, "--help"],
    }


def once(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Wall-clock seconds of one fresh process running argv (`-m launcher` imports cwd's code)."""
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=cwd, env=env)
    return time.perf_counter() - start


def cases(against: Path | None, python: str | None) -> dict[str, tuple[list[str], Path]]:
    """Every case, its argv and the directory it runs in (`-m launcher` imports that one's code);
    each command twice with `against`; with `python`, outside any checkout (the installed code)."""
    if python is not None:
        return {name: (argv, Path("/")) for name, argv in commands(python, ROOT / "configs").items()}
    every = commands(sys.executable, Path("configs"))
    out = {name: (argv, ROOT) for name, argv in every.items()}
    if against is not None:
        for name, argv in every.items():
            if argv[1:3] == ["-m", "launcher"]:
                out[f"{name} [{against.name}]"] = (argv, against)
    return out


def main() -> None:
    """Run the benchmark and print one line per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--against", type=Path, help="another checkout whose commands run alongside")
    parser.add_argument("--python", help="the interpreter of a venv where spark-launch is installed")
    args = parser.parse_args()
    if args.against is not None and args.python is not None:
        parser.error("--against compares checkouts with this interpreter; --python measures an install")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    every = cases(args.against, args.python)
    times: dict[str, list[float]] = {name: [] for name in every}
    for round_ in range(args.runs + 1):
        for name, (argv, cwd) in every.items():
            seconds = once(argv, env, cwd)
            if round_:  # the first round writes bytecode and warms the page cache
                times[name].append(seconds)
    bare = statistics.median(times["python -c pass"])
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, runs in times.items():
        median, best = statistics.median(runs), min(runs)
        print(
            f"{name:<32} median {median * 1000:6.1f} ms   best {best * 1000:6.1f} ms   "
            f"{median / bare:4.2f}x python -c pass   ({args.runs} runs, alternating)"
        )


if __name__ == "__main__":
    main()
