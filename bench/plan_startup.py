"""Cold start of `spark-launch plan` as operators run it: installed as a package, not editable.

The launcher is built and installed (`pip install .`, a wheel, its bytecode compiled) into a
venv of its own; pipx, the nearest tool, into another, from the same package index and with the
same interpreter. Every case is a fresh process started from outside the source tree, and the
cases run one after the other in each round (the first round is not counted), so a change of
load on the machine hits them all alike. Each ratio is taken within a round (paired), and the
median of the rounds' ratios is reported, with each case's median and best time.

The yardsticks:
- the floor: the same interpreter importing only the libraries `plan` stands on
  (`import click, yaml, dataclasses, json`); the goal is `plan` <= 1.6 times it;
- the nearest tool: `pipx --help`. pipx is a command line of the same kind as spark-launch (an
  operator types one of a dozen subcommands at a terminal; a thin main dispatches to plain
  command functions), pure Python with a few light dependencies, and installed by operators
  beside it. (`http --help` loads requests and its stack first, a heavier tool than either:
  the comparison would flatter `plan`.)

With `--against DIR` (another checkout, e.g. the last commit before a change), that code is
installed into a third venv and its commands run in the same rounds: before and after, paired.
`--venvs DIR` keeps the venvs there for the next run (built again with `--rebuild`).

    python bench/plan_startup.py [--runs 20] [--against DIR] [--venvs DIR [--rebuild]]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
FLOOR = "import click, yaml, dataclasses, json"
NEAREST = "pipx"  # see the module's docstring: why pipx
GOAL = 1.6


def venv_with(folder: Path, *requirements: str, fresh: bool = False, rebuild: bool = False) -> Path:
    """A venv at `folder` (made with this interpreter) holding `requirements` as pip installs them:
    one already there is kept unless `rebuild`; `fresh`: the requirements installed again even so
    (the code under test). Its bin directory."""
    bin_dir = folder / "bin"
    if rebuild and folder.exists():
        shutil.rmtree(folder)
    if not (bin_dir / "python").exists():
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(folder)], check=True)
        pip_install(bin_dir, *requirements)
    elif fresh:  # what it needs now, then itself again (same version, new code)
        pip_install(bin_dir, *requirements)
        pip_install(bin_dir, "--force-reinstall", "--no-deps", *requirements)
    return bin_dir


def pip_install(bin_dir: Path, *args: str) -> None:
    """pip install ARGS into the venv; what pip said is shown only when it fails."""
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    done = subprocess.run([*pip, *args], capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"pip install {' '.join(args)} failed:\n{done.stdout}{done.stderr}")


def versions(python: Path, *distributions: str) -> str:
    """`name version` of each distribution installed where `python` runs."""
    code = (
        "import sys, importlib.metadata as m; print(', '.join(f'{d} {m.version(d)}' for d in sys.argv[1:]))"
    )
    done = subprocess.run(
        [str(python), "-c", code, *distributions], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def cases(launcher: Path, nearest: Path, against: Path | None) -> dict[str, list[str]]:
    """Every case's argv: the interpreter alone, the floor, the launcher's commands, the nearest tool."""
    every = {
        "python -c pass": [str(launcher / "python"), "-c", "pass"],
        "floor: " + FLOOR: [str(launcher / "python"), "-c", FLOOR],
    }
    for bin_dir, label in [(launcher, ""), *([(against, " [against]")] if against else [])]:
        program = str(bin_dir / "spark-launch")
        every |= {
            f"plan demo.yaml{label}": [program, "plan", str(CONFIGS / "demo.yaml")],
            f"plan qwen3-next --json{label}": [
                program,
                "plan",
                str(CONFIGS / "qwen3-next-2x-spark.yaml"),
                "--json",
            ],
            f"validate dense{label}": [program, "validate", str(CONFIGS / "dense-2x-spark.yaml")],
            f"spark-launch --help{label}": [program, "--help"],
        }
    every[f"{NEAREST} --help"] = [str(nearest / NEAREST), "--help"]
    return every


def once(argv: list[str], env: dict[str, str]) -> float:
    """Wall-clock seconds of one fresh process running argv, from outside the source tree."""
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd="/", env=env)
    return time.perf_counter() - start


def rounds(every: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    """Each case's time in each counted round (the cases one after the other in a round)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    times: dict[str, list[float]] = {name: [] for name in every}
    for round_ in range(runs + 1):
        for name, argv in every.items():
            seconds = once(argv, env)
            if round_:  # the first round warms the page cache
                times[name].append(seconds)
    return times


def paired(times: dict[str, list[float]], case: str, base: str) -> float:
    """The median over the rounds of case / base, each pair from one round."""
    return statistics.median(a / b for a, b in zip(times[case], times[base], strict=True))


def report(times: dict[str, list[float]], runs: int, nearest: str) -> None:
    """One line per case, then the paired ratios of each launcher command to the yardsticks."""
    floor = "floor: " + FLOOR
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {runs} rounds")
    for name, seconds in times.items():
        median, best = statistics.median(seconds), min(seconds)
        print(f"{name:<52} median {median * 1000:6.1f} ms   best {best * 1000:6.1f} ms")
    print(f"paired ratios (median over rounds): to the floor (goal <= {GOAL}) and to `{nearest} --help`")
    for name in times:
        if name.startswith(("plan", "validate", "spark-launch")):
            to_floor = paired(times, name, floor)
            verdict = "ok" if to_floor <= GOAL or not name.startswith("plan") else "OVER"
            twin = f"{name} [against]"
            print(
                f"{name:<52} {to_floor:5.2f}x floor ({verdict})   "
                f"{paired(times, name, f'{NEAREST} --help'):5.2f}x {nearest}   "
                f"{paired(times, name, 'python -c pass'):5.2f}x python -c pass"
                + (f"   {paired(times, name, twin):5.2f}x against" if twin in times else "")
            )


def main() -> None:
    """Install, run the rounds, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--against", type=Path, help="another checkout, installed and run alongside")
    parser.add_argument("--venvs", type=Path, help="keep the venvs here for the next run")
    parser.add_argument("--rebuild", action="store_true", help="build the kept venvs again")
    args = parser.parse_args()
    folder = args.venvs or Path(tempfile.mkdtemp(prefix="plan-startup-"))
    try:
        launcher = venv_with(folder / "launcher", str(ROOT), fresh=True, rebuild=args.rebuild)
        nearest = venv_with(folder / NEAREST, NEAREST, rebuild=args.rebuild)
        against = None
        if args.against is not None:
            against = venv_with(
                folder / "against", str(args.against.resolve()), fresh=True, rebuild=args.rebuild
            )
        mine = versions(launcher / "python", "spark-launch", "click", "PyYAML")
        print(f"installed: {mine}; {versions(nearest / 'python', NEAREST)}; Python {sys.version.split()[0]}")
        report(rounds(cases(launcher, nearest, against), args.runs), args.runs, NEAREST)
    finally:
        if args.venvs is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
