"""The agreement gate of an exported pod: its own vLLM resolves its exact command, as planned.

Runs as the init container of every pod `spark-launch export k8s` writes, in the pod's image,
with the pod's environment and volumes, under vLLM's own Python (standard library and vLLM
only; the probe is inlined in front of it). It resolves the pod's `vllm serve` argv exactly as
`spark-launch check` does on a node (the probe's `resolve`: config.json only, no weights, no
device memory) and holds the answer to the plan's values, which travel beside it in the
pod's ConfigMap. On any difference it writes the differing settings to the termination
message (`kubectl describe pod` shows it) and exits 1: vLLM never starts with settings the
other ranks would not derive.

    python k8s_gate.py EXPECTED.json -- SERVE_ARGV...
"""

from __future__ import annotations

import json
import os
import sys

from launcher.node.scripts.probe import MARKER, run_job  # inlined when sent

TYPE_CHECKING = False  # these names serve annotations only
if TYPE_CHECKING:
    from typing import Any

TERMINATION_LOG = "/dev/termination-log"
MAX_MESSAGE = 4000  # Kubernetes keeps 4096 bytes of a termination message
USAGE = "usage: python k8s_gate.py EXPECTED.json -- SERVE_ARGV...  (the argv after `vllm serve`)"


def same_release(written: str, reported: object) -> bool:
    """The release `check` accepts: the same version, or for one written without a local label,
    that version with any (0.33.0 is matched by 0.33.0+cu130)."""
    found = str(reported)
    return found == written or ("+" not in written and found.partition("+")[0] == written)


def wanted(value: Any, env: dict[str, str]) -> Any:
    """A planned value as this pod must derive it: `$(NAME)` is what LeaderWorkerSet gives NAME here."""
    if isinstance(value, str) and value.startswith("$(") and value.endswith(")"):
        return env.get(value[2:-1], value)
    return value


def differences(result: dict[str, Any], expected: dict[str, Any], env: dict[str, str]) -> list[str]:
    """Each setting this pod's vLLM derives otherwise than planned, as `key: derived (planned ...)`.

    The rule is `check`'s for one node (launcher.core.checks.probe_rows): a key the probe cannot
    read is no agreement, and every value the plan decides must be derived as decided."""
    if not result.get("ok"):
        return [f"vLLM rejects the planned command: {result.get('error')}"]
    out = []
    version = expected.get("vllm_version")
    if version and not same_release(version, result.get("vllm_version")):
        out.append(f"vllm version: {result.get('vllm_version')} (planned {version})")
    resolved = result.get("resolved") or {}
    for key, value in expected.get("settings", {}).items():
        pin = expected.get("pins", {}).get(key, "")
        if key not in resolved or key in resolved.get("missing", ()):
            out.append(f"{key}: not reported by this vLLM (planned {value!r}, {pin})")
        elif resolved[key] != wanted(value, env):
            out.append(f"{key}: {resolved[key]!r} (planned {wanted(value, env)!r}, pinned by {pin})")
    return out


def refuse(lines: list[str], expected: dict[str, Any]) -> None:
    """Say why this pod may not start: on stderr, and as the container's termination message."""
    text = (
        f"spark-launch gate: {expected.get('deployment', 'this deployment')}'s vLLM would not start "
        f"as planned (plan {expected.get('plan', '?')}):\n" + "\n".join(f"  {line}" for line in lines) + "\n"
    )
    sys.stderr.write(text)
    if not os.path.exists(TERMINATION_LOG):  # not in a pod (a person trying it): no file made in /dev
        return
    with open(TERMINATION_LOG, "w") as f:
        f.write(text[:MAX_MESSAGE])


def main(argv: list[str]) -> int:
    """Resolve the serve argv after `--`, compare with EXPECTED.json; 0 when it agrees."""
    if len(argv) < 3 or argv[1] != "--":
        print(USAGE, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        expected = json.load(f)
    # As `check` sees it: the probe's answer as JSON.
    result = json.loads(json.dumps(run_job("resolve", argv[2:], {}), default=str))
    print(MARKER + json.dumps(result, default=str), flush=True)  # in `kubectl logs -c gate`
    found = differences(result, expected, dict(os.environ))
    if found:
        refuse(found, expected)
        return 1
    checked = len(expected.get("settings", {}))
    print(f"spark-launch gate: vLLM {result.get('vllm_version')} derives the {checked} planned settings")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
