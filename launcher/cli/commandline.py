"""The command line's own layer: commands declared by decorators, argv parsed, help, usage errors
and shell completion written. It uses nothing outside the standard library.

A command is a function declared with `@command()` and its `@option(...)` and `@argument(...)`
(a group's with `@group()`); it is called with the values parsed, and returns an ExitStatus.
The declarations read as click's do, and the command line keeps the conventions users of
click-based tools know: `--name value`, `--name=value`, `-n value`, `-nVALUE`, `-fw`, `--`
before arguments that start with a dash; "Usage: ... Error: ..." and exit status 2 for a
wrong command line; help laid out in the same columns; the `_SPARK_LAUNCH_COMPLETE` shell
completion. It is the launcher's own, not a library, because importing a command-line library
and building 18 commands with it was a fifth of `spark-launch plan`'s cold start.

Parsing imports nothing. Help is laid out by `helptext` and shell completion answered by
`completion`, each imported by the program only when asked for (`Help` says which command's).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: plan's start-up does without it
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, MutableMapping, Sequence
    from typing import Any

    Converter = Callable[[str], Any]


class UsageError(Exception):
    """The command line is wrong: printed with the command's usage, exit status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.command: Command | None = None  # set where the command being parsed or run is known
        self.prog = ""

    def show(self) -> str:
        """The text for stderr: the usage and how to get help, then the error."""
        if self.command is None:
            return f"Error: {self.message}"
        usage = self.command.usage(self.prog)
        return f"{usage}\nTry '{self.prog} --help' for help.\n\nError: {self.message}"


class BadParameter(UsageError):
    """A value the command cannot use: "Invalid value for '--hosts': ...", exit status 2."""

    def __init__(self, message: str, param_hint: str | None = None) -> None:
        super().__init__(f"Invalid value for {param_hint}: {message}" if param_hint else message)


class MissingValue(UsageError):
    """An option that takes a value, given last without one (completion offers its values)."""

    def __init__(self, name: str, option: Option) -> None:
        super().__init__(f"Option {_quote(name)} requires an argument.")
        self.option = option


class Exit(Exception):
    """End the command now with this status (`--version`)."""

    def __init__(self, code: int = 0) -> None:
        super().__init__(code)
        self.code = code


class Help(Exit):
    """End the command now: print `command`'s help (on stderr when `code` is not 0), run as `prog`."""

    def __init__(self, command: Command, prog: str, code: int = 0) -> None:
        super().__init__(code)
        self.command = command
        self.prog = prog


class Context:
    """One run of the command line: `meta` for what options say to the code that runs (shared by a
    group and its command), callbacks to run when the command ends."""

    def __init__(self) -> None:
        self.meta: dict[str, object] = {}
        self._on_close: list[Callable[[], object]] = []

    def call_on_close(self, function: Callable[[], object]) -> None:
        """Run `function` when the command has ended, however it ended."""
        self._on_close.append(function)

    def exit(self, code: int = 0) -> None:
        """End the command now with this status."""
        raise Exit(code)

    def close(self) -> None:
        for function in reversed(self._on_close):
            function()
        self._on_close.clear()


_RUNNING: list[Context] = []


def current_context() -> Context:
    """The Context of the command running now."""
    if not _RUNNING:
        raise RuntimeError("no spark-launch command is running")
    return _RUNNING[-1]


# Types: a converter from the word given to the value, with the name help shows for it.


class File:
    """A file's path (kept as given): refused when it names a directory or a file not readable."""

    metavar = "FILE"
    label = ""

    def __call__(self, value: str) -> str:
        if os.path.isdir(value):
            raise ValueError(f"File {_quote(value)} is a directory.")
        if os.path.exists(value) and not os.access(value, os.R_OK):
            raise ValueError(f"File {_quote(value)} is not readable.")
        return value


class FloatRange:
    """A number above `min` (`min_open`: strictly) or at least `min`."""

    metavar = "FLOAT"

    def __init__(self, min: float, min_open: bool = False) -> None:
        self.min = min
        self.min_open = min_open
        self.label = f"x{'>' if min_open else '>='}{min:g}"

    def __call__(self, value: str) -> float:
        number = _float(value)
        if not (number > self.min if self.min_open else number >= self.min):  # nan too
            raise ValueError(f"{number} is not in the range {self.label}.")
        return number


def _float(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{_quote(value)} is not a valid float.") from None


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{_quote(value)} is not a valid integer.") from None


def _text(value: str) -> str:
    return value


_BUILTIN: dict[object, tuple[Converter, str]] = {
    float: (_float, "FLOAT"),
    int: (_int, "INTEGER"),
    str: (_text, "TEXT"),
}


def _converter(kind: object) -> tuple[Converter, str, str]:
    """The function converting a word, the metavar help shows for it, the range it is limited to."""
    if kind in _BUILTIN:
        function, metavar = _BUILTIN[kind]
        return function, metavar, ""
    if isinstance(kind, (File, FloatRange)):
        return kind, kind.metavar, kind.label
    raise TypeError(f"no converter for {kind!r}")


def _quote(text: str) -> str:
    return f"'{text}'"


# Parameters


class Option:
    """`--name VALUE`, a flag, a count (`-vv`) or a repeatable option."""

    def __init__(
        self,
        decls: Sequence[str],
        *,
        is_flag: bool = False,
        count: bool = False,
        multiple: bool = False,
        type: object = str,
        default: object = None,
        show_default: bool = False,
        metavar: str | None = None,
        required: bool = False,
        help: str = "",
        callback: Callable[[Context, Option, Any], object] | None = None,
        expose_value: bool = True,
        is_eager: bool = False,
    ) -> None:
        self.opts = [d for d in decls if d.startswith("-")]
        names = [d for d in decls if not d.startswith("-")]
        longest = max(self.opts, key=lambda o: (o.startswith("--"), len(o)))
        self.name = names[0] if names else longest.lstrip("-").replace("-", "_").lower()
        self.takes_value = not (is_flag or count)
        self.is_flag, self.count, self.multiple = is_flag, count, multiple
        self.convert, type_metavar, self.range = _converter(type)
        self.metavar = metavar or type_metavar
        self.default = () if multiple else 0 if count else False if is_flag else default
        self.show_default, self.required, self.help = show_default, required, help
        self.callback, self.expose_value, self.is_eager = callback, expose_value, is_eager

    def hint(self) -> str:
        """How a usage error names it: '-n' / '--lines'."""
        return " / ".join(map(_quote, self.opts))

    def value(self, given: list[str] | None) -> object:
        """The value from the words given (None: not given), converted."""
        if given is None:
            if self.required:
                raise UsageError(f"Missing option {_quote(self.opts[0])}.")
            default = self.default
            if self.multiple or not self.takes_value or default is None:
                return default
            return self.convert(str(default))
        if self.count:
            return len(given)
        if self.is_flag:
            return True
        try:
            converted = [self.convert(word) for word in given]
        except ValueError as exc:
            raise BadParameter(str(exc), self.hint()) from None
        return tuple(converted) if self.multiple else converted[-1]

    def help_row(self) -> tuple[str, str]:
        """The two columns of this option in help: its names (and metavar), its help."""
        names = ", ".join(self.opts) + (f" {self.metavar}" if self.takes_value else "")
        extra = []
        if self.show_default and self.default is not None:
            extra.append(f"default: {self.default}")
        if self.range:
            extra.append(self.range)
        if self.required:
            extra.append("required")
        shown = f"[{'; '.join(extra)}]" if extra else ""
        return names, f"{self.help}  {shown}" if self.help and shown else self.help or shown


class Argument:
    """A positional argument; `nargs=-1`: every remaining one (none too)."""

    def __init__(self, name: str, *, type: object = str, metavar: str | None = None, nargs: int = 1) -> None:
        self.name = name
        self.convert, _, _ = _converter(type)
        self.metavar = metavar or name.upper()
        self.nargs = nargs
        self.callback = None
        self.expose_value = True
        self.is_eager = False

    def value(self, given: list[str]) -> object:
        if self.nargs == -1:
            return tuple(self._converted(word) for word in given)
        if not given:
            raise UsageError(f"Missing argument {_quote(self.metavar)}.")
        return self._converted(given[0])

    def _converted(self, word: str) -> object:
        try:
            return self.convert(word)
        except ValueError as exc:
            raise BadParameter(str(exc), _quote(self.metavar)) from None


HELP_NAMES = ("-h", "--help")


class Command:
    """A command: its function, its parameters in the order declared, its help (the docstring)."""

    def __init__(self, function: Callable[..., Any], name: str | None = None) -> None:
        self.function = function
        self.name = name or function.__name__.replace("_", "-")
        declared: list[Option | Argument] = getattr(function, "__parameters__", [])
        self.params = list(reversed(declared))  # decorators apply from the bottom up
        self.help = _cleandoc(function.__doc__ or "").split("\f", 1)[0]

    @property
    def options(self) -> list[Option]:
        return [p for p in self.params if isinstance(p, Option)]

    @property
    def arguments(self) -> list[Argument]:
        return [p for p in self.params if isinstance(p, Argument)]

    def by_word(self) -> dict[str, Option]:
        """Each option by each of its names (`-n` and `--lines`)."""
        return {name: o for o in self.options for name in o.opts}

    def usage(self, prog: str) -> str:
        words = [f"Usage: {prog} [OPTIONS]"]
        words += [a.metavar for a in self.arguments]
        return " ".join(words)

    def short_help(self, limit: int) -> str:
        """The first sentence of the help, or as much of it as fits `limit` with "..."."""
        paragraph = self.help.split("\n\n", 1)[0].replace("\b", "")
        words = paragraph.split()
        shown: list[str] = []
        for word in words:
            if len(" ".join([*shown, word])) > limit:
                while shown and len(" ".join(shown)) + 3 > limit:
                    shown.pop()
                return " ".join(shown) + "..."
            shown.append(word)
            if word.endswith("."):
                break
        return " ".join(shown)

    def parse(
        self, words: Sequence[str], interspersed: bool = True
    ) -> tuple[dict[str, list[str]], list[str]]:
        """The words given to each option (by name), and the positional words, in order. With
        `interspersed` False (a group), the first positional word ends the options: it and what
        follows are the positional words."""
        by_word = self.by_word()
        given: dict[str, list[str]] = {}
        positional: list[str] = []
        rest = list(words)
        while rest:
            word = rest.pop(0)
            if word == "--":
                positional += rest
                break
            if word.startswith("-") and len(word) > 1:
                for name, value in options_in(word, rest, by_word):
                    given.setdefault(name, []).append(value)
            elif interspersed:
                positional.append(word)
            else:
                positional += [word, *rest]
                break
        return given, positional

    def values(self, ctx: Context, given: dict[str, list[str]], positional: list[str]) -> dict[str, object]:
        """Every parameter's value, converted and checked, callbacks run (eager ones first);
        the arguments the function takes."""
        by_argument: dict[str, list[str]] = {}
        left = list(positional)
        for argument in self.arguments:
            take = len(left) if argument.nargs == -1 else 1
            by_argument[argument.name], left = left[:take], left[take:]
        if left:
            plural = "s" if len(left) > 1 else ""
            raise UsageError(f"Got unexpected extra argument{plural} ({' '.join(left)})")
        kwargs: dict[str, object] = {}
        for param in sorted(self.params, key=lambda p: not p.is_eager):
            if isinstance(param, Option):
                value = param.value(given.get(param.name))
            else:
                value = param.value(by_argument[param.name])
            if param.callback is not None:
                value = param.callback(ctx, param, value)
            if param.expose_value:
                kwargs[param.name] = value
        return kwargs

    def run(self, ctx: Context, words: Sequence[str], prog: str) -> object:
        """Run the command line `words` of this command, run as `prog`: what its function returns.
        A usage error says this command's usage, unless a command under it said its own."""
        try:
            return self.invoke(ctx, words, prog)
        except UsageError as exc:
            if exc.command is None:
                exc.command, exc.prog = self, prog
            raise

    def invoke(self, ctx: Context, words: Sequence[str], prog: str) -> object:
        """Parse `words` and call the function with their values."""
        given, positional = self.parse(words)
        if "--help" in given:
            raise Help(self, prog)
        return self.function(**self.values(ctx, given, positional))


class Group(Command):
    """Commands under one name (`sync models`, `export systemd`); its options come before them."""

    def __init__(
        self,
        function: Callable[..., Any],
        name: str | None = None,
        commands: MutableMapping[str, Command] | None = None,
    ) -> None:
        super().__init__(function, name)
        self.commands: MutableMapping[str, Command] = commands if commands is not None else {}

    def usage(self, prog: str) -> str:
        return f"Usage: {prog} [OPTIONS] COMMAND [ARGS]..."

    def command(self, name: str | None = None) -> Callable[[Callable[..., Any]], Command]:
        """Declare a command of this group."""

        def declare(function: Callable[..., Any]) -> Command:
            made = Command(function, name)
            self.commands[made.name] = made
            return made

        return declare

    def invoke(self, ctx: Context, words: Sequence[str], prog: str) -> object:
        """Parse the group's options, run its function, then the command named next."""
        given, positional = self.parse(words, interspersed=False)
        if "--help" in given:
            raise Help(self, prog)
        kwargs = self.values(ctx, given, [])  # --version ends here
        if not words:  # as --help, on stderr, and a usage error's status
            raise Help(self, prog, 2)
        if not positional:
            raise UsageError("Missing command.")
        name, rest = positional[0], positional[1:]
        if name not in self.commands:
            raise UsageError(f"No such command {_quote(name)}.{_did_you_mean(name, self.commands, 1)}")
        self.function(**kwargs)
        return self.commands[name].run(ctx, rest, f"{prog} {name}")


def options_in(word: str, rest: list[str], by_word: dict[str, Option]) -> list[tuple[str, str]]:
    """The options one word gives (`--name`, `--name=value`, `-n`, `-nVALUE`, `-fw`), each by its
    name with the word it was given ("" for a flag); a value that is the next word is taken from
    `rest`. Help is "--help"."""
    if word in HELP_NAMES:
        return [("--help", "")]
    if word.startswith("--"):
        name, equals, value = word.partition("=")
        option = _known(name, by_word)
        if equals and not option.takes_value:
            raise UsageError(f"Option {_quote(name)} does not take a value.")
        return [(option.name, value if equals or not option.takes_value else _next_value(name, option, rest))]
    out = []
    letters = word[1:]
    while letters:
        name, letters = f"-{letters[0]}", letters[1:]
        if name in HELP_NAMES:
            out.append(("--help", ""))
            continue
        option = _known(name, by_word)
        if not option.takes_value:
            out.append((option.name, ""))
            continue
        out.append((option.name, letters or _next_value(name, option, rest)))
        break
    return out


def _known(name: str, by_word: dict[str, Option]) -> Option:
    if name not in by_word:
        raise UsageError(f"No such option {_quote(name)}.{_did_you_mean(name, by_word)}")
    return by_word[name]


def _next_value(name: str, option: Option, rest: list[str]) -> str:
    if not rest:
        raise MissingValue(name, option)
    return rest.pop(0)


def _did_you_mean(word: str, choices: Iterable[str], most: int = 3) -> str:
    """ " Did you mean '--lines'?" (or the few that are close), or nothing."""
    import difflib  # an error only

    close = difflib.get_close_matches(word, list(choices), n=most)
    if not close:
        return ""
    return (
        f" Did you mean {_quote(close[0])}?"
        if len(close) == 1
        else f" (Possible options: {', '.join(close)})"
    )


def _cleandoc(text: str) -> str:
    """A docstring without its indentation (as inspect.cleandoc, without importing inspect)."""
    lines = text.expandtabs().split("\n")
    margin = min((len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()), default=0)
    cleaned = [lines[0].strip(), *(line[margin:].rstrip() for line in lines[1:])]
    while cleaned and not cleaned[0]:
        cleaned.pop(0)
    while cleaned and not cleaned[-1]:
        cleaned.pop()
    return "\n".join(cleaned)


# Declaring


def _attach(param: Option | Argument) -> Callable[[Any], Any]:
    def decorate(function: Any) -> Any:
        if isinstance(function, Command):
            raise TypeError(f"@option/@argument go below @command: {function.name}")
        function.__dict__.setdefault("__parameters__", []).append(param)
        return function

    return decorate


def option(*decls: str, **settings: Any) -> Callable[[Any], Any]:
    """Declare an option of the command below (`@option("-o", "--output", help=...)`)."""
    return _attach(Option(decls, **settings))


def argument(name: str, **settings: Any) -> Callable[[Any], Any]:
    """Declare a positional argument of the command below."""
    return _attach(Argument(name, **settings))


def command(name: str | None = None) -> Callable[[Callable[..., Any]], Command]:
    """Declare a command: its name (default: the function's), its parameters, its docstring."""
    return lambda function: Command(function, name)


def group(
    name: str | None = None, commands: MutableMapping[str, Command] | None = None
) -> Callable[[Callable[..., Any]], Group]:
    """Declare a group of commands (its function runs before the command, with the group's options)."""
    return lambda function: Group(function, name, commands)


def main(root: Group, words: Sequence[str], prog: str) -> object:
    """Run the command line `words` (after the program's name): what the command returns.
    UsageError, Help and Exit reach the caller; the Context's close callbacks have run."""
    ctx = Context()
    _RUNNING.append(ctx)
    try:
        return root.run(ctx, words, prog)
    finally:
        _RUNNING.pop()
        ctx.close()


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """Write text to stdout (stderr with `err`) and flush it: each line is out when written."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{text}\n" if nl else text)
    stream.flush()
