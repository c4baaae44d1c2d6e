"""`python -m testbed`: parse arguments, call bed operations, map errors to exit codes."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from testbed import bed, model, vllm_env
from testbed.errors import ExitStatus, TestbedError
from testbed.layout import DEFAULT_DIR, MAX_NODES, Layout, make_nodes


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the only place that turns errors into exit codes."""
    args = _parser().parse_args(argv)
    started = time.monotonic()
    try:
        status: int = args.func(args)
    except TestbedError as exc:
        print(exc.render(), file=sys.stderr)
        return ExitStatus.FAILURE
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    if args.command in ("up", "down"):
        print(f"testbed: {args.command} in {time.monotonic() - started:.2f}s", file=sys.stderr)
    return status


def _up(args: argparse.Namespace) -> int:
    """Bring the bed up (idempotent) and print how to reach it."""
    layout = Layout(args.dir, make_nodes(args.nodes, args.node_env))
    info = bed.up(layout, with_vllm=not args.no_vllm, venv_wait=args.venv_wait, docker=args.docker)
    for node in layout.nodes:
        env = " ".join(f"{k}={v}" for k, v in node.env)
        print(f"{node.name}: {node.address} in {node.namespace}" + (f" env {env}" if env else ""))
    print(f"ssh -F {info['ssh_config']} node1")
    print(f"description: {layout.description}")
    return ExitStatus.OK


def _down(args: argparse.Namespace) -> int:
    """Tear the bed down; a second run finds nothing and succeeds."""
    removed = bed.down(Layout(args.dir))
    print("removed: " + (" ".join(removed) if removed else "nothing (already down)"))
    return ExitStatus.OK


def _status(args: argparse.Namespace) -> int:
    """Print what is up; exit NOT_UP unless every node is reachable."""
    info = bed.status(Layout(args.dir))
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"bridge: {'up' if info['bridge'] else 'absent'}")
        for n in cast("list[dict[str, Any]]", info["nodes"]):
            print(
                f"{n['name']}: {'ok' if n['ok'] else 'DOWN'} ns={n['present']} "
                f"addr={','.join(n['addresses']) or '-'} sshd={n['sshd_pid'] or '-'}"
            )
    return ExitStatus.OK if info["up"] else ExitStatus.NOT_UP


def _model(args: argparse.Namespace) -> int:
    """Write the tiny model dir, using the vLLM venv's python for the tokenizer."""
    python = args.python or vllm_env.ensure_venv(args.venv_wait) / "bin" / "python"
    model.write_model(Layout(args.dir).model, python)
    print(Layout(args.dir).model)
    return ExitStatus.OK


def _bind(args: argparse.Namespace) -> int:
    """Bind-mount SOURCE over TARGET on one node only."""
    bed.bind_mount(Layout(args.dir), args.node, args.source, args.target, args.read_only)
    return ExitStatus.OK


def _tmpfs(args: argparse.Namespace) -> int:
    """Mount a small tmpfs over TARGET on one node only."""
    bed.tmpfs_mount(Layout(args.dir), args.node, args.target, args.size)
    return ExitStatus.OK


def _unbind(args: argparse.Namespace) -> int:
    """Undo a per-node bind mount."""
    bed.unbind_mount(Layout(args.dir), args.node, args.target)
    return ExitStatus.OK


def _link(args: argparse.Namespace) -> int:
    """Add or delete an extra interface on one node (tests of how init picks the fabric)."""
    layout = Layout(args.dir)
    if args.action == "add" and not (args.name and args.address):
        raise TestbedError(
            "link add needs NODE NAME ADDRESS", "e.g. link add node2 fab2 10.97.0.2/24 --bridge sltbf1"
        )
    if args.action == "add":
        bed.add_link(layout, args.node, args.name, args.address, args.bridge)
    else:
        print("removed: " + (" ".join(bed.remove_link(layout, args.node, args.name)) or "nothing"))
    return ExitStatus.OK


def _parser() -> argparse.ArgumentParser:
    """The argument parser with one subcommand per operation."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dir",
        type=lambda s: Path(s).absolute(),
        default=DEFAULT_DIR,
        help=f"state dir (default {DEFAULT_DIR})",
    )
    parser = argparse.ArgumentParser(
        prog="python -m testbed",
        description="A real multi-node test bed: namespaces, one sshd per node, a CPU vLLM.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up", parents=[common], help="create or repair the bed (idempotent)")
    p.add_argument("--nodes", type=int, default=2, help=f"node count, 1 to {MAX_NODES}")
    p.add_argument(
        "--node-env",
        action="append",
        default=[],
        metavar="nodeI:NAME=VALUE",
        help="sshd SetEnv for one node (repeatable); omitted ones are removed",
    )
    p.add_argument("--no-vllm", action="store_true", help="skip the vLLM venv and model")
    p.add_argument(
        "--docker",
        action="store_true",
        help="also a Docker engine per node, holding the test image (built from local material, cached)",
    )
    p.add_argument(
        "--venv-wait",
        type=float,
        default=1800.0,
        help="seconds to wait for another process's venv build",
    )
    p.set_defaults(func=_up)
    sub.add_parser("down", parents=[common], help="remove everything").set_defaults(func=_down)
    p = sub.add_parser("status", parents=[common], help="show what is up")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_status)
    p = sub.add_parser("model", parents=[common], help="write the tiny Qwen3-Next model")
    p.add_argument("--python", type=Path, help="a python with `tokenizers` (default: the venv's)")
    p.add_argument("--venv-wait", type=float, default=1800.0)
    p.set_defaults(func=_model)
    for name, func in (("bind", _bind), ("unbind", _unbind)):
        p = sub.add_parser(name, parents=[common], help=f"{name} a path on one node only")
        p.add_argument("node", help="node1, node2, ...")
        if name == "bind":
            p.add_argument("source", type=Path)
            p.add_argument("--read-only", action="store_true", help="mount it read-only")
        p.add_argument("target", type=Path)
        p.set_defaults(func=func)
    p = sub.add_parser("link", parents=[common], help="add or delete an extra interface on a node")
    p.add_argument("action", choices=["add", "del"])
    p.add_argument("node", nargs="?", default="node1", help="node1, node2, ... (del without NAME: all)")
    p.add_argument("name", nargs="?", help="the interface name inside the node, e.g. fab2")
    p.add_argument("address", nargs="?", help="add: the address with its prefix, e.g. 10.97.0.2/24")
    p.add_argument("--bridge", help="add: wire it to this extra bridge (sltbf...); default: to nothing")
    p.set_defaults(func=_link)
    p = sub.add_parser("tmpfs", parents=[common], help="a small tmpfs over a path on one node only")
    p.add_argument("node", help="node1, node2, ...")
    p.add_argument("target", type=Path)
    p.add_argument("--size", default="64M", help="its size (default 64M); `unbind` removes it")
    p.set_defaults(func=_tmpfs)
    return parser
