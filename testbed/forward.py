"""Keep the host's packet filter from cutting the bed's bridges.

With br_netfilter loaded and net.bridge.bridge-nf-call-iptables = 1, frames crossing a Linux
bridge pass the iptables FORWARD chain. A system Docker daemon (or a firewall) that sets that
chain's policy to DROP then silently drops the traffic between the bed's nodes: a worker's
connection to the head's master port times out. So when the bed comes up and bridged frames
meet a FORWARD chain that is not plain ACCEPT, one rule accepts what stays on the bed's
bridges (every bridge the bed makes is named sltb*); `down` takes it away again. Nothing
else of the host's filter is touched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from testbed.shell import run

BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
COMMENT = ("-m", "comment", "--comment", "spark-launch-testbed")
RULE: tuple[str, ...] = ("FORWARD", "-i", "sltb+", "-o", "sltb+", *COMMENT, "-j", "ACCEPT")


def bridged_frames_filtered() -> bool:
    """True when frames crossing a bridge go through iptables (br_netfilter on)."""
    try:
        return BRIDGE_NF.read_text().strip() == "1"
    except OSError:
        return False


def chain() -> str:
    """`iptables -S FORWARD`: the policy and the rules, or "" without iptables."""
    if shutil.which("iptables") is None:
        return ""
    return run(["iptables", "-S", "FORWARD"], check=False).stdout


def _present() -> bool:
    return run(["iptables", "-C", *RULE], check=False).returncode == 0


def ensure_open() -> str | None:
    """Accept the bed's bridged traffic where the host's FORWARD chain could drop it; what was done."""
    rules = chain()
    if not bridged_frames_filtered() or not rules:
        return None
    if "-P FORWARD ACCEPT" in rules and not any(w in rules for w in (" DROP", " REJECT", "-j DOCKER")):
        return None
    if _present():
        return None
    run(["iptables", "-I", *RULE[:1], "1", *RULE[1:]])
    return (
        "testbed: bridged traffic passes iptables and its FORWARD chain may drop it "
        "(a system Docker daemon does that): accepting what stays on the sltb* bridges"
    )


def close() -> None:
    """Remove the bed's rule (every copy of it), if any."""
    while chain() and _present():
        run(["iptables", "-D", *RULE])
