"""Build the real `vllm serve` argument parser of the vLLM installed beside this file's caller.

Runs inside a vLLM environment, never in the launcher's own: it imports vLLM. It is
shared by the catalog generator and the resolve probe, and copes with the module moves
between the supported releases. Standard library and vLLM only.
"""

from __future__ import annotations

import argparse
import os


def serve_parser() -> argparse.ArgumentParser:
    """Return the parser `vllm serve` itself uses, built the way vLLM's CLI builds it."""
    # The official wheel cannot infer a device on a machine without a GPU; the answer
    # does not change the parser, only platform defaults.
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.entrypoints.cli.serve import ServeSubcommand

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # releases before the utils package split
        from vllm.utils import FlexibleArgumentParser  # type: ignore[attr-defined,no-redef]

    root = FlexibleArgumentParser(prog="vllm")
    subparsers = root.add_subparsers(dest="subparser")
    parser: argparse.ArgumentParser = ServeSubcommand().subparser_init(subparsers)
    return parser


def parse_serve_argv(argv: list[str]) -> argparse.Namespace:
    """Parse `vllm serve ...` argv (without the `vllm serve` words) as vLLM does."""
    args = serve_parser().parse_args(argv)
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    return args
