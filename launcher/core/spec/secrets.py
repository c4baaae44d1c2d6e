"""What looks like a secret: by a variable's name, or by the shape of a value. Pure.

Used to refuse secrets written into a spec's `env:` (they belong under `secrets:`, whose
values come from the launcher's environment and never reach an argv, a plan or a log), and
to take them out of text that leaves the machine (`core.redact`). The node scripts keep a
copy of these rules (`node/scripts/inputs.py`); a test holds the two equal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from launcher.errors import Problem

# Names: *TOKEN, *KEY, *SECRET, *PASSWD and anything holding PASSWORD (case aside).
SECRET_NAME = re.compile(r"(?i)^(?:[A-Z0-9_]*(?:TOKEN|KEY|SECRET|PASSWD)|[A-Z0-9_]*PASSWORD[A-Z0-9_]*)$")
# Settings that match a secret's name but hold none.
NOT_SECRET = frozenset({"NCCL_IB_PKEY"})
# Well-known token shapes, by who issues them.
TOKEN_SHAPES = (
    ("a Hugging Face token", r"hf_[A-Za-z0-9]{30,}"),
    ("an OpenAI or Anthropic key", r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),
    ("a GitHub token", r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ("a GitLab token", r"glpat-[A-Za-z0-9_-]{20,}"),
    ("an NVIDIA NGC key", r"nvapi-[A-Za-z0-9_-]{20,}"),
    ("an AWS access key", r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    ("a Slack token", r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    ("a JSON web token", r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"),
)
TOKEN = re.compile("|".join(f"(?:{shape})" for _, shape in TOKEN_SHAPES))
MOVE_IT = (
    "list its name under secrets: and export it where you run spark-launch: "
    "its value then reaches the nodes' processes only, never a command line, a plan or a log"
)


def secret_name(name: str) -> bool:
    """True when a variable's name says it holds a secret (HF_TOKEN, OPENAI_KEY, DB_PASSWORD_FILE)."""
    return bool(SECRET_NAME.match(name)) and name.upper() not in NOT_SECRET


def token_kind(value: str) -> str | None:
    """What kind of well-known token the value holds (a Hugging Face token, ...), or None."""
    if TOKEN.search(value) is None:  # the usual answer, without compiling each shape's own pattern
        return None
    for kind, shape in TOKEN_SHAPES:
        if re.search(rf"(?<![A-Za-z0-9_-]){shape}", value):
            return kind
    return None


def secret_problems(where: tuple[str | int, ...], env: Mapping[str, str]) -> list[Problem]:
    """A problem for each variable of an `env:` that looks like a secret, by its name or its
    value; the value itself is never shown."""
    problems = []
    for name, value in env.items():
        kind = token_kind(value)
        if secret_name(name):
            why = f"{name} looks like a secret (by its name), and env: values are shown in plans and logs"
        elif kind is not None:
            why = f"the value of {name} looks like {kind}, and env: values are shown in plans and logs"
        else:
            continue
        problems.append(Problem((*where, name), why, MOVE_IT))
    return problems
