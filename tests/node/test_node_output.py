"""What the launcher keeps of a node command's output (launcher/node/output.py): both streams
read at once, each up to a limit, then a NodeError naming the node and the command ended.

Through the local FAKE executor, which runs the same reading code as SSH; the real SSH path
(where an unread stderr stalls the channel) is tests/e2e/test_hostile_node.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from launcher.node.executor import NodeError
from launcher.node.output import MAX_HTTP, MAX_STDERR, MAX_STDOUT, TooMuch, lines, read_body
from tests.fakes.local import LocalExecutor


def test_an_answer_beyond_the_limit_is_refused_naming_the_node(tmp_path: Path) -> None:
    with pytest.raises(NodeError) as caught:
        LocalExecutor(tmp_path).run("n1", f"head -c {3 * MAX_STDOUT} /dev/zero; touch finished")
    assert caught.value.node == "n1"
    assert f"wrote more than {MAX_STDOUT >> 20} MiB on stdout: stopped it there" in caught.value.message
    assert not (tmp_path / "finished").exists()  # the command was ended, not read to its end


def test_a_flood_on_stderr_is_refused_and_does_not_hold_up_the_answer(tmp_path: Path) -> None:
    with pytest.raises(NodeError, match=f"more than {MAX_STDERR >> 20} MiB on stderr"):
        LocalExecutor(tmp_path).run("n1", f"head -c {4 * MAX_STDERR} /dev/zero >&2; echo '{{}}'")


def test_stderr_is_read_while_stdout_is(tmp_path: Path) -> None:
    """A command that writes much on stderr before its answer (as vLLM's logs do) is answered."""
    command = f"head -c {MAX_STDERR // 2} /dev/zero | tr '\\0' x >&2; echo answer"
    result = LocalExecutor(tmp_path).run("n1", command)
    assert result.ok and result.stdout == "answer\n" and len(result.stderr) == MAX_STDERR // 2


def test_a_stream_flooding_stderr_is_refused(tmp_path: Path) -> None:
    seen: list[str] = []
    with pytest.raises(NodeError, match="on stderr"):
        LocalExecutor(tmp_path).stream(
            "n1", f"echo one; head -c {4 * MAX_STDERR} /dev/zero >&2; echo two", seen.append
        )
    assert seen[:1] == ["one"]


def test_a_streamed_line_beyond_the_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NodeError, match="on stdout \\(one line\\)"):
        LocalExecutor(tmp_path).stream("n1", f"head -c {2 * MAX_STDOUT} /dev/zero", lambda line: None)


def test_lines_come_whole_across_reads() -> None:
    blocks = iter([b"a", b"b\nc", b"d\n\ne", b""])
    assert list(lines(lambda n: next(blocks), 10, lambda: None)) == [b"ab", b"cd", b"", b"e"]


def test_a_line_longer_than_the_limit_stops_the_stream() -> None:
    stopped: list[bool] = []
    blocks = iter([b"x" * 8, b"x" * 8, b"\n", b""])
    with pytest.raises(TooMuch):
        list(lines(lambda n: next(blocks), 10, lambda: stopped.append(True)))
    assert stopped == [True]


class _Sized(BaseHTTPRequestHandler):
    """Answers GET /N with N bytes."""

    def do_GET(self) -> None:
        size = int(self.path.strip("/"))
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        for _ in range(size >> 20):
            self.wfile.write(bytes(1 << 20))
        self.wfile.write(bytes(size % (1 << 20)))

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sized)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_http_answer_beyond_the_limit_is_refused_naming_the_node(tmp_path: Path, port: int) -> None:
    with pytest.raises(NodeError) as caught:
        LocalExecutor(tmp_path).http("n1", port, "GET", f"/{MAX_HTTP + (1 << 20)}")
    assert caught.value.node == "n1"
    assert f"answered more than {MAX_HTTP >> 20} MiB" in caught.value.message


def test_an_http_answer_up_to_the_limit_is_read_whole(tmp_path: Path, port: int) -> None:
    assert len(LocalExecutor(tmp_path).http("n1", port, "GET", f"/{MAX_HTTP}").body) == MAX_HTTP


def test_a_body_stops_being_read_just_past_the_limit() -> None:
    asked: list[int] = []

    def read(size: int) -> bytes:
        asked.append(size)
        return b"x" * size

    with pytest.raises(NodeError, match="more than 0 MiB"):
        read_body("n1", "GET /", read, limit=100)
    assert sum(asked) == 101
