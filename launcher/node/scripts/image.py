"""The spec's image as this node's docker engine holds it, and the free space where it keeps images."""

from __future__ import annotations

import os
import sys

from .common import docker, emit, image_info, run_directory


def image(name: str) -> None:
    """Id, repo digests and size of image `name` here; the engine's data root and its free bytes."""
    info = image_info(name)
    root, free = None, None
    if info["docker"]:
        done = docker("info", "--format", "{{.DockerRootDir}}")
        root = done.stdout.strip() or None
        if done.returncode == 0 and root:
            try:
                stat = os.statvfs(root)
                free = stat.f_bavail * stat.f_frsize
            except OSError:
                free = None
    emit(ok=True, **info, root_dir=root, free_bytes=free)


def main(argv: list[str]) -> None:
    """image DIR IMAGE"""
    run_directory(argv)
    image(argv[1])


if __name__ == "__main__":  # python3 -S -c STUB UNIT NAME DIR ARGS...
    main(sys.argv[2:])
