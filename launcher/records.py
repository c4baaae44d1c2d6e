"""Frozen records: what `@dataclass(frozen=True)` makes, defined in a fraction of its time.

On Python 3.11 and 3.12, `dataclass(frozen=True)` writes six methods (`__init__`, `__repr__`,
`__eq__`, `__hash__`, `__setattr__`, `__delattr__`) as source text and compiles each on its
own: about 0.4 ms a class. `spark-launch plan` defines 28 such classes before it reads a spec,
a fifth of its cold start. `record` lets dataclasses collect the fields (so `fields()`,
`replace()`, `asdict()` and `field(default=..., default_factory=..., compare=..., repr=...)`
work as ever) and compiles one method, `__init__`; the other five are functions shared by
every record, reading the class's field names. The behaviour is a frozen dataclass's: equal by
the compared fields and of the same class, hashable by them, immutable (FrozenInstanceError),
the same repr.

Not supported, and refused when declared: keyword-only fields, `InitVar`, and inheriting from a
dataclass (records are leaves). A record's `__dataclass_params__` says init, repr and eq False:
dataclasses did not write those methods, this module did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:  # for type checkers only: a record is a frozen dataclass to them
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda function: function


T = TypeVar("T")
_MISSING = dataclasses.MISSING
_SET = object.__setattr__


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, eq: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T] | None = None, /, *, eq: bool = True) -> type[T] | Callable[[type[T]], type[T]]:
    """Make `cls` a frozen record; `@record(eq=False)` when the class compares by its own methods."""

    def build(cls: type[T]) -> type[T]:
        if any(dataclasses.is_dataclass(base) for base in cls.__mro__[1:]):
            raise TypeError(f"record {cls.__qualname__}: a record cannot inherit from a dataclass")
        for name in ("__setattr__", "__delattr__"):
            if name in cls.__dict__:
                raise TypeError(f"record {cls.__qualname__} is frozen: it cannot define {name}")
        if not cls.__doc__:  # else dataclasses writes one from inspect.signature: a millisecond
            names = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - as dataclasses reads them
            cls.__doc__ = f"{cls.__name__}({', '.join(names)})"
        dataclasses.dataclass(cls, init=False, repr=False, eq=False)  # the fields; nothing compiled
        every = dataclasses.fields(cls)  # type: ignore[arg-type]
        _set_new(cls, "__init__", _init(cls, every))
        _set_new(cls, "__repr__", _repr)
        cls.__setattr__ = _frozen_setattr  # type: ignore[method-assign]
        cls.__delattr__ = _frozen_delattr  # type: ignore[method-assign]
        cls.__record_shown__ = tuple(f.name for f in every if f.repr)  # type: ignore[attr-defined]
        if eq:
            compared = [f.name for f in every if f.compare]
            key = attrgetter(*compared) if compared else _nothing
            cls.__record_key__ = key  # type: ignore[attr-defined]
            _set_new(cls, "__eq__", _eq)
            if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
                cls.__hash__ = _hash  # type: ignore[method-assign]
        return cls

    return build if cls is None else build(cls)


def _set_new(cls: type, name: str, value: object) -> None:
    """Set a method unless the class body defines its own (as dataclasses does)."""
    if name not in cls.__dict__:
        setattr(cls, name, value)


def _init(cls: type, every: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    """The class's `__init__`, compiled from its fields: one compile for the whole class."""
    self_name = "__record_self__" if any(f.name == "self" for f in every) else "self"
    params: list[str] = []
    body: list[str] = []
    scope: dict[str, object] = {"__record_set__": _SET, "__record_missing__": _MISSING}
    for f in every:
        if f.kw_only:
            raise TypeError(f"record {cls.__qualname__}: keyword-only field {f.name!r} is not supported")
        factory = f"__record_factory_{f.name}__"
        default = f"__record_default_{f.name}__"
        if f.default_factory is not _MISSING:
            scope[factory] = f.default_factory
        elif f.default is not _MISSING:
            scope[default] = f.default
        if not f.init:
            if f.default_factory is not _MISSING:
                body.append(f"__record_set__({self_name}, {f.name!r}, {factory}())")
            elif f.default is not _MISSING:
                body.append(f"__record_set__({self_name}, {f.name!r}, {default})")
            continue
        if f.default_factory is not _MISSING:
            params.append(f"{f.name}=__record_missing__")
            value = f"{factory}() if {f.name} is __record_missing__ else {f.name}"
        elif f.default is not _MISSING:
            params.append(f"{f.name}={default}")
            value = f.name
        else:
            if params and "=" in params[-1]:
                raise TypeError(
                    f"record {cls.__qualname__}: {f.name!r} has no default but follows a field that has one"
                )
            params.append(f.name)
            value = f.name
        body.append(f"__record_set__({self_name}, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append(f"{self_name}.__post_init__()")
    source = f"def __init__({', '.join([self_name, *params])}):\n    " + "\n    ".join(body or ["pass"])
    exec(source, scope)  # the source is built above from the class's own field names only
    init: Callable[..., None] = scope["__init__"]  # type: ignore[assignment]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init


def _nothing(_: object) -> tuple[()]:
    return ()


def _eq(self: Any, other: object) -> object:  # bool, or NotImplemented
    if other.__class__ is not self.__class__:
        return NotImplemented
    key = self.__class__.__record_key__  # type: ignore[attr-defined]  # from the class: not bound
    return key(self) == key(other)


def _hash(self: Any) -> int:
    return hash(self.__class__.__record_key__(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_shown__)
    return f"{self.__class__.__qualname__}({shown})"


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: object, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
