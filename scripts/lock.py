"""Write a fully pinned, hashed requirements file from the wheels pip really downloads.

    python3 scripts/lock.py OUT --target x86_64-3.11 [--target aarch64-3.12 ...] \
        [--glibc 2.35] [--title TEXT] REQUIREMENT...

For each target (a CPU architecture and a CPython version, on Linux), pip resolves the
requirements and downloads wheels only (never a source archive: installing from the lock never
builds code), in a throwaway venv of this Python, through whatever index this machine's pip is
set to use. The first target's resolution pins every version; the other targets resolve under
those pins (a package only one target needs is added, and its wheel for every other target
fetched), so one version of each package serves every target. The recorded hashes are the
sha256 of the files pip downloaded, each file named in a comment above its package: a file the
index serves differently later fails the install, it is never installed.

Install from it with `pip install --require-hashes --no-deps --only-binary :all: -r OUT`.

Ours rather than pip-tools' `pip-compile --generate-hashes`: that records the hash of every file
the index lists for a version (every platform and Python: thousands of hashes, minutes per
run), not those of the wheels the targets install, and it resolves for this machine only.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

# A wheel's file name: name-version(-build)?-python-abi-platform.whl (PEP 427, names normalised).
WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
TARGET = re.compile(r"^(?P<arch>x86_64|aarch64)-(?P<python>3\.\d+)$")


def canonical(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def platform_args(target: str, glibc: str) -> list[str]:
    """pip's options for a target: its CPython, and every manylinux tag up to the oldest glibc
    the target's nodes run (pip does not expand manylinux_2_X by itself)."""
    match = TARGET.match(target)
    if not match:
        raise SystemExit(f"lock.py: target {target!r} is not ARCH-PYTHON (x86_64-3.11, aarch64-3.12)")
    arch, python = match["arch"], match["python"]
    newest = int(glibc.split(".")[1])
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(newest, 16, -1)]
    tags.append(f"manylinux2014_{arch}")
    args = ["--implementation", "cp", "--python-version", python, "--only-binary", ":all:"]
    for tag in tags:
        args += ["--platform", tag]
    return args


def wheels(folder: Path) -> dict[str, tuple[str, list[Path]]]:
    """The wheels pip left in `folder`: canonical name -> (version, files)."""
    found: dict[str, tuple[str, list[Path]]] = {}
    for path in sorted(folder.iterdir()):
        match = WHEEL.match(path.name)
        if not match:
            raise SystemExit(f"lock.py: pip left {path.name}, which is not a wheel")
        name, version = canonical(match["name"]), match["version"]
        if name in found and found[name][0] != version:
            raise SystemExit(f"lock.py: two versions of {name} downloaded: {found[name][0]}, {version}")
        found.setdefault(name, (version, []))[1].append(path)
    return found


def download(pip: list[str], target: str, glibc: str, folder: Path, args: list[str]) -> None:
    """pip download for one target into `folder`; pip's own message on failure."""
    command = [*pip, "download", "--quiet", "--dest", str(folder), *platform_args(target, glibc), *args]
    print(f"lock.py: {target}: pip download {' '.join(args)}", file=sys.stderr)
    if subprocess.run(command, check=False).returncode != 0:
        raise SystemExit(f"lock.py: pip could not get wheels for {target} (above: why)")


def lock(
    requirements: list[str], targets: list[str], glibc: str, work: Path, hold: Path | None = None
) -> dict[str, dict[str, str]]:
    """canonical name -> {version, and each file's name -> its sha256}, across every target.
    `hold`: a requirements file whose versions the resolution keeps (the lock as it is)."""
    venv.create(work / "venv", with_pip=True)
    pip = [str(work / "venv" / "bin" / "python"), "-m", "pip"]
    folders = {t: work / t for t in targets}
    pins: dict[str, str] = {}
    if hold is not None:
        for line in hold.read_text().splitlines():
            found = re.match(r"^([A-Za-z0-9._-]+)==([^ \\]+)", line)
            if found:
                pins[canonical(found[1])] = found[2]
    for target in targets:
        folders[target].mkdir()
        constraints = work / "constraints.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
        download(pip, target, glibc, folders[target], ["-c", str(constraints), *requirements])
        for name, (version, _) in wheels(folders[target]).items():
            if pins.setdefault(name, version) != version:
                raise SystemExit(f"lock.py: {target} needs {name} {version}, another target {pins[name]}")
    held = set(pins) - {n for t in targets for n in wheels(folders[t])}  # no longer needed: dropped
    for name in held:
        del pins[name]
    for target in targets:  # a package that only another target's resolution named
        missing = sorted(set(pins) - set(wheels(folders[target])))
        if missing:
            download(
                pip, target, glibc, folders[target], ["--no-deps", *(f"{n}=={pins[n]}" for n in missing)]
            )
    locked: dict[str, dict[str, str]] = {}
    for target in targets:
        for name, (version, files) in wheels(folders[target]).items():
            entry = locked.setdefault(name, {"version": version})
            for path in files:
                entry[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return locked


def render(locked: dict[str, dict[str, str]], title: str, command: str, targets: list[str]) -> str:
    """The requirements file: a header, then each package with its files and their hashes."""
    lines = [f"# {line}".rstrip() for line in title.splitlines()]
    lines += [f"# Written by `{command}`: do not edit by hand.", f"# targets: {' '.join(targets)}", ""]
    for name in sorted(locked):
        entry = dict(locked[name])
        version = entry.pop("version")
        files = sorted(entry)
        lines += [f"# {f}" for f in files]
        lines.append(f"{name}=={version} \\")
        hashes = [f"    --hash=sha256:{entry[f]}" for f in files]
        lines += [h + " \\" for h in hashes[:-1]] + [hashes[-1]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("requirements", nargs="+")
    parser.add_argument("--target", action="append", required=True, help="ARCH-PYTHON, e.g. aarch64-3.12")
    parser.add_argument("--glibc", default="2.35", help="the oldest glibc of the target's nodes")
    parser.add_argument("--title", default="", help="the header's first lines")
    parser.add_argument("--command", default="scripts/lock.py", help="the command named in the header")
    parser.add_argument("--hold", type=Path, help="keep the versions this lock pins; add only what is new")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lock-") as work:
        locked = lock(args.requirements, args.target, args.glibc, Path(work), args.hold)
    args.out.write_text(render(locked, args.title, args.command, args.target))
    files = sum(len(e) - 1 for e in locked.values())
    print(f"lock.py: {args.out}: {len(locked)} packages, {files} wheels", file=sys.stderr)


if __name__ == "__main__":
    main()
