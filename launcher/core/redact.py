"""Taking secret values out of text that leaves the machine (a diagnose bundle). Pure.

Known values (the spec's secrets, as the launcher and the running processes hold them)
are replaced wherever they appear; and, whatever their value, assignments to names that
say they are secret (`HF_TOKEN=...`, `api_key: ...`) and bearer tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "<redacted>"
ASSIGNMENT = re.compile(
    r"(?i)\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY))\b"
    r"(['\"]?\s*[=:]\s*['\"]?)([^\s'\",}]+)"
)
BEARER = re.compile(r"(?i)(bearer\s+)([A-Za-z0-9._~+/=-]+)")


def redact(text: str, values: Iterable[str]) -> str:
    """`text` with every known secret value, secret-looking assignment and bearer token replaced."""
    for value in sorted({v for v in values if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = ASSIGNMENT.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
    return BEARER.sub(lambda m: m.group(1) + REDACTED, text)
