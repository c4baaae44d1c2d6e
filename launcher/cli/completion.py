"""Shell completion (bash, zsh, fish): the script a shell loads, and the answers it asks for.

    eval "$(_SPARK_LAUNCH_COMPLETE=bash_source spark-launch)"      # ~/.bashrc
    eval "$(_SPARK_LAUNCH_COMPLETE=zsh_source spark-launch)"       # ~/.zshrc
    _SPARK_LAUNCH_COMPLETE=fish_source spark-launch | source       # ~/.config/fish/config.fish

The script calls `spark-launch` again with `_SPARK_LAUNCH_COMPLETE=<shell>_complete` and the
words typed so far (COMP_WORDS, COMP_CWORD); the answer is one `type,value` line per candidate:
`plain,validate` (a word to offer), `file,` (let the shell complete a file name). Commands are
listed by name, without importing them; only the command being typed is imported.
"""

from __future__ import annotations

import os
import shlex
import sys

from launcher.cli.commandline import (
    HELP_NAMES,
    Argument,
    Command,
    File,
    Group,
    MissingValue,
    Option,
    UsageError,
    options_in,
)

SOURCES = {
    "bash": """\
_spark_launch_completion() {
    local IFS=$'\\n'
    local response type value
    response=$(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD=$COMP_CWORD \\
        _SPARK_LAUNCH_COMPLETE=bash_complete "$1")
    for completion in $response; do
        IFS=',' read -r type value <<< "$completion"
        if [[ $type == 'file' ]]; then
            COMPREPLY=()
            compopt -o default
        elif [[ $type == 'plain' ]]; then
            COMPREPLY+=("$value")
        fi
    done
    return 0
}
complete -o nosort -F _spark_launch_completion %(prog)s
""",
    "zsh": """\
#compdef %(prog)s
_spark_launch_completion() {
    local -a completions response
    local line
    response=("${(@f)$(env COMP_WORDS="${words[*]}" COMP_CWORD=$((CURRENT-1)) \\
        _SPARK_LAUNCH_COMPLETE=zsh_complete %(prog)s)}")
    for line in $response; do
        if [[ "${line%%%%,*}" == "file" ]]; then
            _path_files -f
        elif [[ "${line%%%%,*}" == "plain" ]]; then
            completions+=("${line#*,}")
        fi
    done
    if [ -n "$completions" ]; then
        compadd -U -V unsorted -a completions
    fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _spark_launch_completion "$@"
else
    compdef _spark_launch_completion %(prog)s
fi
""",
    "fish": """\
function _spark_launch_completion
    set -l response (env _SPARK_LAUNCH_COMPLETE=fish_complete \\
        COMP_WORDS=(commandline -cp) COMP_CWORD=(commandline -t) %(prog)s)
    for completion in $response
        set -l metadata (string split -m 1 "," -- $completion)
        if test $metadata[1] = "file"
            __fish_complete_path (commandline -t)
        else if test $metadata[1] = "plain"
            echo $metadata[2]
        end
    end
end
complete --no-files --command %(prog)s --arguments "(_spark_launch_completion)"
""",
}


def answer(root: Group, instruction: str, prog: str) -> int:
    """Do what `_SPARK_LAUNCH_COMPLETE` asks (`bash_source`, `zsh_complete`, ...): the exit status."""
    shell, _, action = instruction.partition("_")
    if shell not in SOURCES or action not in ("source", "complete"):
        known = ", ".join(f"{s}_source" for s in SOURCES)
        sys.stderr.write(
            f"spark-launch: _SPARK_LAUNCH_COMPLETE={instruction} is not known; use one of {known}\n"
        )
        return 1
    if action == "source":
        sys.stdout.write(SOURCES[shell] % {"prog": prog})
        return 0
    args, incomplete = typed(shell)
    for kind, value in candidates(root, args, incomplete):
        sys.stdout.write(f"{kind},{value}\n")
    return 0


def typed(shell: str) -> tuple[list[str], str]:
    """The words typed after the program's name, and the word being typed (maybe empty)."""
    words = split(os.environ.get("COMP_WORDS", ""))
    if shell == "fish":  # COMP_WORDS: the line up to the cursor; COMP_CWORD: the word being typed
        incomplete = os.environ.get("COMP_CWORD", "")
        args = words[1:]
        if incomplete and args and args[-1] == incomplete:
            args.pop()
        return args, incomplete
    cword = int(os.environ.get("COMP_CWORD", "0") or 0)
    return words[1:cword], words[cword] if cword < len(words) else ""


def split(line: str) -> list[str]:
    """Words as the shell splits them; an open quote keeps the word typed so far."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    out: list[str] = []
    try:
        out.extend(lexer)
    except ValueError:
        out.append(lexer.token)
    return out


def candidates(root: Group, args: list[str], incomplete: str) -> list[tuple[str, str]]:
    """What may come next after `args`, starting with `incomplete`: (type, value) pairs. The
    words are read as the parser reads them (`options_in`); an option given last without its
    value is the one whose value comes next."""
    command: Command = root
    expecting: Option | None = None
    arguments_seen = 0
    rest = list(args)
    while rest:
        word = rest.pop(0)
        if word.startswith("-") and word != "-":
            try:
                options_in(word, rest, command.by_word())  # takes the option's value from rest
            except MissingValue as exc:
                expecting = exc.option
            except UsageError:
                pass  # not an option of this command: what follows is completed as if it were not there
            continue
        if isinstance(command, Group):
            if word not in command.commands:
                return []
            command, arguments_seen = command.commands[word], 0
            continue
        arguments_seen += 1
    if expecting is not None:
        return [("file", "")] if isinstance(expecting.convert, File) else []
    if incomplete.startswith("-"):
        names = [*command.by_word(), *HELP_NAMES]
        return [("plain", n) for n in names if n.startswith(incomplete)]
    if isinstance(command, Group):
        return [("plain", n) for n in command.commands if n.startswith(incomplete)]
    upcoming = _argument_at(command.arguments, arguments_seen)
    return [("file", "")] if upcoming is not None and isinstance(upcoming.convert, File) else []


def _argument_at(arguments: list[Argument], index: int) -> Argument | None:
    for argument in arguments:
        if argument.nargs == -1:
            return argument
        if index == 0:
            return argument
        index -= 1
    return None
