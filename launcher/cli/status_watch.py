"""`status --watch`: the status refreshed until Ctrl-C, in place on a terminal, a line each when piped."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from launcher.cli.progress import UP
from launcher.errors import ExitStatus, printable

if TYPE_CHECKING:
    from launcher.node.cluster import Reached


def watch_status(
    cluster: Reached,
    deadline: float,
    every: float,
    as_json: bool,
    stream: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ExitStatus:
    """`status --watch`: on a terminal the status redrawn in place, piped one line per refresh."""
    from launcher.core.reports import status_text
    from launcher.operations.running.cluster_status import status as look

    out = stream or sys.stdout
    live = out.isatty() and not as_json
    shown, since, verdict = 0, None, ExitStatus.FAILURE
    try:
        while True:
            result = look(cluster, deadline, since)
            since = result.counters or since
            verdict = (
                ExitStatus.OK
                if result.state == "running" and result.serving and result.serving.serving
                else ExitStatus.FAILURE
            )
            stamp = time.strftime("%H:%M:%S")
            if as_json:
                out.write(json.dumps({"time": stamp, **result.as_dict()}) + "\n")
            elif live:
                lines = [
                    f"[{stamp}] every {every:.0f} s, Ctrl-C to stop",
                    *status_text(result, time.time()).splitlines(),
                ]
                out.write((UP.format(n=shown) if shown else "") + printable("\n".join(lines)) + "\n")
                shown = len(lines)
            else:
                serving = result.serving
                what = f"{serving.state}: {serving.reason}" if serving else "?"
                out.write(printable(f"{stamp} {result.cluster}: {result.state}, {what}") + "\n")
            out.flush()
            sleep(every)
    except KeyboardInterrupt:
        return verdict
