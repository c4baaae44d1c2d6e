"""Taking secret values out of text that leaves the machine (a diagnose bundle). Pure.

Known values (the spec's secrets, as the launcher and the running processes hold them)
are replaced wherever they appear; and, whatever their value, assignments to names that
say they are secret (`HF_TOKEN=...`, `OPENAI_KEY: ...`, the names `core.spec.secrets`
refuses under `env:`), bearer tokens, and anything shaped like a well-known token (hf_...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from launcher.core.spec.secrets import NOT_SECRET, TOKEN

REDACTED = "<redacted>"
ASSIGNMENT = re.compile(
    r"(?i)\b([A-Z0-9_]*(?:TOKEN|KEY|SECRET|PASSWD)|[A-Z0-9_]*PASSWORD[A-Z0-9_]*)\b"
    r"(['\"]?\s*[=:]\s*['\"]?)([^\s'\",}]+)"
)
BEARER = re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]+)")


def redact(text: str, values: Iterable[str]) -> str:
    """`text` with every known secret value, secret-looking assignment, bearer token and
    token-shaped word replaced."""
    for value in sorted({v for v in values if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = ASSIGNMENT.sub(_assignment, text)
    text = BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return TOKEN.sub(REDACTED, text)


def _assignment(found: re.Match[str]) -> str:
    if found.group(1).upper() in NOT_SECRET:
        return found.group(0)
    return found.group(1) + found.group(2) + REDACTED
