"""Thousands of generated malformed and hostile specs through the real CLI, with their cost.

Every spec (tests/fuzz: mutations of configs/) goes through validate, plan, plan --json and
up --dry-run (and status when refused) in this process, with the promises of
tests/fuzz/promises.py checked on each call; time and peak Python memory (tracemalloc) are
measured per call. Every Nth spec is also run as a fresh `python -m launcher validate`
process, for its wall time and peak RSS including C allocations. Prints the outcome counts,
the worst calls, and every broken promise; exits 1 if any.

    python bench/fuzz_specs.py [--count 5000] [--seed 1] [--process-every 25] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz.promises import SECRET_VALUE, check_file  # noqa: E402
from tests.fuzz.specs import SECRET_NAMES, generate  # noqa: E402

SLOW_S = 2.0  # "a few seconds": a call past this is a broken promise
BIG_MB = 200  # "a few hundred MB"


def in_a_process(path: Path) -> tuple[int, float, float, float]:
    """Exit code, wall seconds, CPU seconds and peak RSS (MB) of a fresh `validate` process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "validate", str(path)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return proc.returncode, time.perf_counter() - start, cpu, usage.ru_maxrss / 1024


def main() -> None:
    """Generate, run, check and report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--process-every", type=int, default=25)
    parser.add_argument("--keep", type=Path, help="write each spec with a broken promise here")
    args = parser.parse_args()
    for name in SECRET_NAMES:
        os.environ[name] = SECRET_VALUE
    work = Path(tempfile.mkdtemp(prefix="spark-launch-fuzz-"))
    (work / "warm.yaml").write_text("name: warm-up\n")
    for spec in (ROOT / "configs" / "demo.yaml", work / "warm.yaml"):  # imports once, unmeasured
        check_file(spec, trace=False)
    (work / "warm.yaml").unlink()
    tracemalloc.start()
    outcomes: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    calls, worst_time, worst_mem, broken = 0, (0.0, ""), (0, ""), []
    processes: list[tuple[int, float, float, float]] = []
    started = time.perf_counter()
    for i in range(args.count):
        raw, applied = generate(random.Random(f"{args.seed}-{i}"))
        path = work / f"spec-{i}.yaml"
        path.write_bytes(raw)
        outcome = check_file(path)
        outcomes[f"spec exit {outcome.code}"] += 1
        for call in outcome.calls:
            calls += 1
            codes[f"{call.args[0]} exit {call.code}"] += 1
            label = f"spec {i} {applied} {' '.join(call.args[:-1])}"
            worst_time = max(worst_time, (call.seconds, label))
            worst_mem = max(worst_mem, (call.peak_bytes, label))
            if call.seconds > SLOW_S:
                outcome.broken.append(f"{label}: {call.seconds:.2f} s")
            if call.peak_bytes > BIG_MB << 20:
                outcome.broken.append(f"{label}: {call.peak_bytes >> 20} MB")
        if args.process_every and i % args.process_every == 0:
            processes.append(in_a_process(path))
        if outcome.broken:
            broken += [f"spec {i} {applied}: {b}" for b in outcome.broken]
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / path.name).write_bytes(raw)
        path.unlink()
    elapsed = time.perf_counter() - started
    work.rmdir()
    print(f"{args.count} specs (seed {args.seed}), {calls} in-process calls, {elapsed:.0f} s")
    broken += report(outcomes, codes, worst_time, worst_mem, processes)
    print(f"broken promises: {len(broken)}")
    for line in broken[:50]:
        print("  " + line)
    sys.exit(1 if broken else 0)


def report(
    outcomes: Counter[str],
    codes: Counter[str],
    worst_time: tuple[float, str],
    worst_mem: tuple[int, str],
    processes: list[tuple[int, float, float, float]],
) -> list[str]:
    """Print the counts and the worst calls; the fresh processes' broken promises."""
    print("outcomes:", ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items())))
    print("calls:   ", ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())))
    print(f"slowest call:      {worst_time[0] * 1000:7.1f} ms  {worst_time[1]}")
    print(f"most memory:       {worst_mem[0] / 2**20:7.1f} MB  {worst_mem[1]} (tracemalloc, the call's own)")
    print(f"this process:      {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:7.1f} MB peak RSS")
    if not processes:
        return []
    exits = Counter(p[0] for p in processes)
    print(
        f"{len(processes)} fresh processes: max {max(p[1] for p in processes) * 1000:.0f} ms wall, "
        f"max {max(p[2] for p in processes) * 1000:.0f} ms CPU, "
        f"max {max(p[3] for p in processes):.0f} MB RSS, "
        f"exits {dict(sorted(exits.items()))}"
    )
    return [f"fresh process exit {code}" for code in exits if code not in (0, 2)]


if __name__ == "__main__":
    main()
