"""`record` behaves as `dataclass(frozen=True)` does: each shape is declared both ways and compared."""

from __future__ import annotations

import dataclasses
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest

from launcher.records import record


def both(body: dict[str, Any], annotations: dict[str, str]) -> tuple[type, type]:
    """The same class body made a record and a frozen dataclass (one name, so reprs compare)."""
    made = []
    for decorate in (record, dataclass(frozen=True)):
        namespace = {"__annotations__": dict(annotations), "__doc__": "A shape.", **body}
        made.append(decorate(type("Shape", (), namespace)))
    return made[0], made[1]


SHAPES = {
    "plain": ({}, {"a": "int", "b": "str"}),
    "defaults": ({"b": "x", "c": ()}, {"a": "int", "b": "str", "c": "tuple[int, ...]"}),
    "factory": ({"d": field(default_factory=list)}, {"a": "int", "d": "list[int]"}),
    "not compared": ({"d": field(default=0, compare=False)}, {"a": "int", "d": "int"}),
    "not shown": ({"d": field(default=0, repr=False)}, {"a": "int", "d": "int"}),
    "not in init": ({"d": field(default=7, init=False)}, {"a": "int", "d": "int"}),
    "factory not in init": (
        {"d": field(default_factory=dict, init=False)},
        {"a": "int", "d": "dict[str, int]"},
    ),
    "no fields": ({}, {}),
    "a field named self": ({}, {"self": "int"}),
}
ARGS = {"plain": (1, "s"), "no fields": (), "a field named self": (3,)}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_record_acts_as_a_frozen_dataclass(shape: str) -> None:
    ours, theirs = both(*SHAPES[shape])
    args = ARGS.get(shape, (1,))
    a, b = ours(*args), theirs(*args)
    assert repr(a) == repr(b)
    assert dataclasses.asdict(a) == dataclasses.asdict(b)  # type: ignore[call-overload]
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
    assert ours.__match_args__ == theirs.__match_args__  # type: ignore[attr-defined]
    assert a == ours(*args)
    try:
        hash(b)
    except TypeError:  # a list field: neither hashes
        with pytest.raises(TypeError, match="unhashable"):
            hash(a)
    else:
        assert hash(a) == hash(ours(*args))
    assert a != b  # another class, as two dataclasses are
    for victim in (a, b):
        with pytest.raises(FrozenInstanceError):
            victim.anything = 1
        with pytest.raises(FrozenInstanceError):
            del victim.anything


def test_compare_false_fields_take_no_part_in_equality_or_hash() -> None:
    ours, _ = both(*SHAPES["not compared"])
    assert ours(1, 2) == ours(1, 3) and hash(ours(1, 2)) == hash(ours(1, 3))
    assert ours(1, 2) != ours(2, 2)


def test_each_instance_gets_its_own_default_from_a_factory() -> None:
    ours, _ = both(*SHAPES["factory"])
    first, second = ours(1), ours(1)
    assert first.d == [] and first.d is not second.d
    assert ours(1, [5]).d == [5]


def test_replace_makes_a_new_record() -> None:
    ours, _ = both(*SHAPES["defaults"])
    changed = dataclasses.replace(ours(1), b="y")
    assert changed == ours(1, "y") and changed != ours(1)


def test_wrong_arguments_are_refused_as_by_any_function() -> None:
    ours, _ = both(*SHAPES["plain"])
    with pytest.raises(TypeError, match=r"Shape.__init__\(\) missing 1 required positional argument: 'b'"):
        ours(1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        ours(1, "s", z=2)


def test_post_init_runs_and_the_class_may_compare_by_its_own_methods() -> None:
    @record(eq=False)
    class Twice:
        """Equal when their doubles are."""

        a: int
        double: int = field(default=0, compare=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "double", 2 * self.a)

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Twice) and self.double == other.double

        def __hash__(self) -> int:
            return self.double

    assert Twice(2).double == 4 and Twice(2) == Twice(2) and hash(Twice(3)) == 6


@pytest.mark.parametrize(
    ("declare", "refusal"),
    [
        (
            lambda: record(type("K", (), {"__annotations__": {"a": "int"}, "a": field(kw_only=True)})),
            "keyword",
        ),
        (lambda: record(type("D", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1})), "no default"),
        (lambda: record(type("S", (), {"__setattr__": lambda *_: None})), "frozen"),
        (lambda: record(type("I", (dataclass(type("B", (), {})),), {})), "inherit"),
    ],
    ids=["keyword-only", "order of defaults", "own __setattr__", "inheriting"],
)
def test_what_a_record_cannot_be_is_refused_when_declared(declare: Any, refusal: str) -> None:
    with pytest.raises(TypeError, match=refusal):
        declare()


def test_a_record_compiles_one_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why records exist: dataclasses (3.11, 3.12) compiles six methods apiece, a record one."""
    import builtins

    compiled: list[str] = []
    real_exec = builtins.exec

    def counting(source: Any, *args: Any) -> None:
        compiled.append(str(source).split("(")[0])
        real_exec(source, *args)

    monkeypatch.setattr(builtins, "exec", counting)
    body, annotations = SHAPES["defaults"]
    record(type("Shape", (), {"__annotations__": dict(annotations), "__doc__": "A shape.", **body}))
    assert compiled == ["def __init__"]


def test_a_record_without_a_docstring_is_named_by_its_fields() -> None:
    made = record(type("Bare", (), {"__annotations__": {"a": "int", "b": "str"}}))
    assert made.__doc__ == "Bare(a, b)"
