"""Text-level mutations of a spec's YAML: what no data structure can express."""

from __future__ import annotations

import random
from collections.abc import Callable


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _value_line(rng: random.Random, text: str) -> tuple[list[str], int] | None:
    """The lines, and the index of a random `key: value` line."""
    lines = _lines(text)
    candidates = [i for i, line in enumerate(lines) if ": " in line and not line.rstrip().endswith(":")]
    return (lines, rng.choice(candidates)) if candidates else None


def _replace_value(rng: random.Random, text: str, new: str) -> str:
    found = _value_line(rng, text)
    if found is None:
        return text
    lines, i = found
    key = lines[i].split(": ", 1)[0]
    lines[i] = f"{key}: {new}"
    return "\n".join(lines)


def bomb(rng: random.Random, text: str) -> str:
    """Nested aliases: `levels` levels of `width` aliases each (9**9 values from ~300 bytes)."""
    width, levels = rng.choice([(9, 9), (10, 6), (3, 4), (2, 30)])
    out = [f"  l0: &l0 [{', '.join(['x'] * width)}]"]
    out += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    where = rng.choice(["bomb", "serve"])
    if where == "serve" and "\nserve:\n" in text:
        return text.replace("\nserve:\n", "\nserve:\n" + "\n".join(out) + "\n", 1)
    return text + "\nbomb:\n" + "\n".join(out) + "\n"


def wide(rng: random.Random, text: str) -> str:
    """Many values in one file: plain, aliased or tagged, around the limits."""
    n = rng.choice([500, 10_500])
    item = rng.choice(["1", "*w", "!!str x", "{}", "[]"])
    return "w: &w 0\n" + text + f"\nwide: [{', '.join([item] * n)}]\n"


def recursive(rng: random.Random, text: str) -> str:
    """An alias inside the value it names."""
    return text + rng.choice(["\nloop: &l [*l]\n", "\nloop: &l {a: *l}\n", "\nloop: &m {<<: *m}\n"])


def deep(rng: random.Random, text: str) -> str:
    """Nesting, flow or block, around and past the limit."""
    n = rng.choice([31, 33, 100, 1200])
    if rng.random() < 0.5:
        return text + f"\ndeep: {'[' * n}{']' * n}\n"
    return text + "\ndeep:\n" + "".join(f"{' ' * (i + 1)}k:\n" for i in range(n)) + f"{' ' * (n + 1)}v\n"


def control_byte(rng: random.Random, text: str) -> str:
    """A raw control character anywhere in the file."""
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice("\x00\x01\x07\x08\x0b\x0c\x1b\x7f\x9b\ufffe") + text[at:]


def truncate(rng: random.Random, text: str) -> str:
    """The file cut short."""
    return text[: rng.randrange(len(text) + 1)]


def noise(rng: random.Random, text: str) -> str:
    """A few YAML-significant characters inserted or removed."""
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(text) + 1)
        if rng.random() < 0.5:
            text = text[:at] + rng.choice(":-[]{}\"'\t&*!|>%@`#,? \n") + text[at:]
        else:
            text = text[:at] + text[at + 1 :]
    return text


def tag(rng: random.Random, text: str) -> str:
    """A YAML tag before a value: sets, binary, dates, Python objects, unknown tags."""
    tags = ["!!set", "!!binary", "!!timestamp", "!!python/object/apply:os.system", "!custom", "!!str"]
    tags += ["!!int", "!!float", "!!map", "!!seq", "!!null", "!!bool", "!!omap", "!!pairs"]
    found = _value_line(rng, text)
    if found is None:
        return text
    lines, i = found
    key, value = lines[i].split(": ", 1)
    lines[i] = f"{key}: {rng.choice(tags)} {value}"
    return "\n".join(lines)


def date(rng: random.Random, text: str) -> str:
    """A value YAML reads as a date, valid or not."""
    return _replace_value(
        rng,
        text,
        rng.choice(["2024-01-01", "2024-13-45", "2024-01-01 10:00:00", "2001-12-14t21:59:43.10-05:00"]),
    )


def huge_number(rng: random.Random, text: str) -> str:
    """A number of many digits, in the forms YAML reads as numbers."""
    digits = "9" * rng.choice([25, 41, 5000, 100_000])
    return _replace_value(
        rng, text, rng.choice([digits, f"0x{digits}", f"{digits}.5", f"1_{digits}", f"-{digits}"])
    )


def long_scalar(rng: random.Random, text: str) -> str:
    """A very long value, under and over the limits (the file's too)."""
    return _replace_value(rng, text, "x" * rng.choice([1000, 70_000, 300_000]))


def line_ends(rng: random.Random, text: str) -> str:
    """A byte-order mark, CRLF or CR line ends."""
    return rng.choice(["\ufeff", ""]) + text.replace("\n", rng.choice(["\r\n", "\r", "\n"]))


def documents(rng: random.Random, text: str) -> str:
    """More than one YAML document."""
    return rng.choice(["---\n", ""]) + text + rng.choice(["\n---\nname: x\n", "\n...\n---\n", "\n---\n"])


def merge(rng: random.Random, text: str) -> str:
    """Merge keys and anchors pointing at other parts of the spec."""
    return (
        text.replace("\nserve:\n", "\nserve:\n  <<: *base\n", 1)
        if "serve:" in text
        else text + "\n<<: {a: 1}\n"
    )


def anchors(rng: random.Random, text: str) -> str:
    """An anchored mapping reused by alias in another place."""
    return "base: &base {port: 8001, seed: 1}\n" + merge(rng, text)


def duplicate_line(rng: random.Random, text: str) -> str:
    """A line written twice (duplicate keys)."""
    lines = _lines(text)
    i = rng.randrange(len(lines))
    return "\n".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])


TEXT_MUTATIONS: dict[str, Callable[[random.Random, str], str]] = {
    "bomb": bomb,
    "wide": wide,
    "recursive": recursive,
    "deep": deep,
    "control_byte": control_byte,
    "truncate": truncate,
    "noise": noise,
    "tag": tag,
    "date": date,
    "huge_number": huge_number,
    "long_scalar": long_scalar,
    "line_ends": line_ends,
    "documents": documents,
    "anchors": anchors,
    "duplicate_line": duplicate_line,
}
