"""Cold-start time of `spark-launch plan` on the example specs, as a user runs it.

Each run is a fresh `python -m launcher plan SPEC` process. Prints the median and the
best of N runs, side by side with a bare `python -c pass` (editors run validate on save).

    python bench/plan_startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(argv: list[str], runs: int) -> list[float]:
    """Wall-clock seconds of `runs` fresh processes running argv."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    """Run the benchmark and print one line per measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "plan demo.yaml": [sys.executable, "-m", "launcher", "plan", "configs/demo.yaml"],
        "plan qwen3-next --json": [
            sys.executable,
            "-m",
            "launcher",
            "plan",
            "configs/qwen3-next-2x-spark.yaml",
            "--json",
        ],
        "validate dense": [sys.executable, "-m", "launcher", "validate", "configs/dense-2x-spark.yaml"],
    }
    bare = None
    for name, argv in cases.items():
        times = timed(argv, args.runs)
        median, best = statistics.median(times) * 1000, min(times) * 1000
        bare = bare or median
        print(
            f"{name:<26} median {median:6.1f} ms   best {best:6.1f} ms   "
            f"{median / bare:4.1f}x python -c pass   ({args.runs} runs)"
        )


if __name__ == "__main__":
    main()
