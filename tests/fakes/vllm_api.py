"""FAKE vLLM API server, for the fast tier only (started by tests/fakes/vllm on rank 0).

Serves /health, /v1/models, /metrics (vLLM's counter names) and 1-token /v1/completions.
A file named `wedge` in DIR makes every completion hang without generating, while /health
stays 200: how a tensor-parallel engine with a frozen rank looks from outside.
FAKE_VLLM_COMPLETIONS_FAIL=1 makes every completion answer 500 (/health still 200).

    python3 vllm_api.py PORT DIR
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"generated": 0, "running": 0}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    """The four endpoints the launcher uses."""

    directory = "."

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"(APIServer) INFO {self.command} {self.path}\n")

    def _send(self, code: int, body: str, kind: str = "application/json") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, "")
        elif self.path == "/v1/models":
            self._send(200, json.dumps({"data": [{"id": "fake-model", "max_model_len": 4096}]}))
        elif self.path == "/metrics":
            with LOCK:
                text = (
                    "# TYPE vllm:num_requests_running gauge\n"
                    f'vllm:num_requests_running{{model_name="fake"}} {STATE["running"]}\n'
                    "# TYPE vllm:num_requests_waiting gauge\n"
                    'vllm:num_requests_waiting{model_name="fake"} 0\n'
                    "# TYPE vllm:generation_tokens_total counter\n"
                    f'vllm:generation_tokens_total{{model_name="fake"}} {STATE["generated"]}\n'
                )
            self._send(200, text, "text/plain; version=0.0.4")
        else:
            self._send(404, "{}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        if self.path != "/v1/completions":
            return self._send(404, "{}")
        if os.environ.get("FAKE_VLLM_COMPLETIONS_FAIL"):  # /health fine, every completion an error
            return self._send(500, json.dumps({"error": "RuntimeError: the kernel would not compile"}))
        with LOCK:
            STATE["running"] += 1
        try:
            while os.path.exists(os.path.join(self.directory, "wedge")):
                time.sleep(0.1)
            with LOCK:
                STATE["generated"] += 1
        finally:
            with LOCK:
                STATE["running"] -= 1
        return self._send(200, json.dumps({"choices": [{"text": " w7"}], "usage": {"completion_tokens": 1}}))


def main() -> None:
    """Serve until killed."""
    port, directory = int(sys.argv[1]), sys.argv[2]
    Handler.directory = directory
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
