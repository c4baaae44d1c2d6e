"""What shipping the node code as one unit costs: the build, the hash check, and each call's load.

- build: `node.unit` zipping node/scripts (once per launcher process);
- hash: the stub reading and hashing the kept unit on the node, before running anything of it;
- load: what a script call costs a node before the script does anything, for the scripts a
  cluster calls most (the status poll, start, stop, check's facts, the manifest): the stub
  run from the kept unit, whose modules zipimport compiles from source at every call (how the
  nodes run them), against the same modules from a bytecode cache (what a hash-checked cache
  would give), and against a bare `python3 -S -c pass`.

Each process is timed by its wall time and its own CPU time (user + system, from wait4), the
variants interleaved run by run so that a change of load on the machine hits them alike;
the figures are medians. The node's python3 is the first on PATH (`--python` to choose).

    python bench/unit_calls.py [--runs 40] [--python /usr/bin/python3]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from launcher.core import stubs
from launcher.node.unit import unit_bytes, unit_sha

SCRIPTS = ("rank_status", "start", "stop", "check_facts", "manifest")
# What the stub does with the kept unit before it runs anything of it: read it, hash it.
HASH = (
    "import hashlib,sys,time;t=time.perf_counter();"
    "hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest();print(time.perf_counter()-t)"
)


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall, cpu) seconds of one process."""
    began = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    assert os.waitstatus_to_exitcode(status) == 0, proc.stderr.read() if proc.stderr else ""
    return wall, usage.ru_utime + usage.ru_stime


def build_ms(runs: int) -> list[float]:
    """Milliseconds to build the unit, uncached."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        unit_bytes.__wrapped__()
        times.append((time.perf_counter() - began) * 1000)
    return times


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--python", default="python3")
    args = parser.parse_args()
    built = build_ms(args.runs)
    print(f"unit: {len(unit_bytes()) / 1024:.0f} KiB, sha256 {unit_sha()[:16]}...")
    print(f"build: median {statistics.median(built):.1f} ms, best {min(built):.1f} ms")
    with tempfile.TemporaryDirectory() as home:
        kept = Path(home, stubs.UNIT_HOME, f"{unit_sha()}.pyz")
        kept.parent.mkdir(parents=True)
        kept.write_bytes(unit_bytes())
        cached = Path(home, "cached")
        zipfile.ZipFile(kept).extractall(cached)
        subprocess.run([args.python, "-m", "compileall", "-q", str(cached)], check=True)
        compileall.compile_dir(str(cached), quiet=1)
        hash_argv = [args.python, "-S", "-c", HASH, str(kept)]
        hashed = [
            float(subprocess.run(hash_argv, capture_output=True, text=True, check=True).stdout)
            for _ in range(args.runs)
        ]
        print(f"hash check on the node ({args.python}): median {statistics.median(hashed) * 1000:.2f} ms")
        env = {**os.environ, "HOME": home}
        load_only = stubs.RUN_STUB.replace('run_name="__main__"', 'run_name="bench"')
        from_bytecode = (
            f"import sys;sys.path.insert(0,{str(cached)!r});import runpy;"
            "runpy.run_module('spark_node.'+sys.argv[1],run_name='bench')"
        )
        variants = {
            "unit (compiled each call)": lambda s: [args.python, "-S", "-c", load_only, unit_sha(), s],
            "bytecode cache": lambda s: [args.python, "-S", "-c", from_bytecode, s],
        }
        floor: list[tuple[float, float]] = []
        found: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            floor.append(timed([args.python, "-S", "-c", "pass"], env, home))
            for script in SCRIPTS:
                for name, argv in variants.items():
                    found.setdefault((script, name), []).append(timed(argv(script), env, home))
        wall0, cpu0 = (statistics.median(x) * 1000 for x in zip(*floor, strict=True))
        print(f"python3 -S -c pass: wall {wall0:.1f} ms, cpu {cpu0:.1f} ms")
        print("load before the script runs (wall / cpu ms, median; + over the bare start):")
        for script in SCRIPTS:
            cells = []
            for name in variants:
                wall, cpu = (statistics.median(x) * 1000 for x in zip(*found[script, name], strict=True))
                cells.append(f"{name} {wall:.1f} / {cpu:.1f} (+{cpu - cpu0:.1f} cpu)")
            print(f"  {script:12} " + "; ".join(cells))


if __name__ == "__main__":
    main()
