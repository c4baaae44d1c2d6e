"""Two deployments behind one endpoint on the test bed: the time to serve both, and what the
endpoint adds to each request against the deployment's own port.

Holds the test bed's session lock (as the e2e tests do), runs `spark-launch up` of
configs/demo-multi.yaml (timed: both deployments serving, a first completion each, and the
endpoint answering), then sends, per deployment, `--requests` one-token completions through
the endpoint and as many to the deployment's own port, alternating one and the other, and
prints the medians and their difference. Every request goes to the bed's own addresses
(network namespaces on this machine); `down` follows unless --keep.

    python bench/endpoint_latency.py [--requests 50] [--keep]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bed import ROOT, SESSION_LOCK, cli

DEMO = ROOT / "configs" / "demo-multi.yaml"
ENDPOINT = "http://10.99.0.1:9000/v1"
KEY = "sk-bench-" + secrets.token_hex(16)  # the endpoint's client key for this run
ENV = {**os.environ, "SPARK_ENDPOINT_KEY": KEY}
OWN = {"tiny-qwen3-next": "http://10.99.0.1:8000/v1", "tiny-llama": "http://10.99.0.2:8001/v1"}


def one_token(base: str, model: str) -> float:
    """Seconds for one completed token (the same prompt every time)."""
    body = json.dumps({"model": model, "prompt": "w5 w6 w7", "max_tokens": 1}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"}
    request = urllib.request.Request(f"{base}/completions", body, headers)
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    seconds = time.perf_counter() - began
    assert answer["model"] == model, answer
    return seconds


def added_latency(model: str, requests: int) -> tuple[float, float]:
    """Median seconds through the endpoint and to the deployment's own port, alternating."""
    through, direct = [], []
    for _ in range(requests):
        through.append(one_token(ENDPOINT, model))
        direct.append(one_token(OWN[model], model))
    return statistics.median(through), statistics.median(direct)


def main() -> None:
    """Up (timed), the latencies per deployment, then down."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--keep", action="store_true", help="leave the deployments running")
    args = parser.parse_args()
    data = {**yaml.safe_load(DEMO.read_text()), "api": {"listen": "fabric"}}
    spec = Path(tempfile.mkdtemp()) / "demo-multi.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    with SESSION_LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        cli("down", spec, "--grace", "5", env=ENV)
        began = time.perf_counter()
        done = cli("up", spec, "--json", env=ENV)
        serve = time.perf_counter() - began
        if done.returncode != 0:
            sys.exit(f"up failed:\n{done.stderr}")
        print(f"up of both deployments and the endpoint: {serve:.1f} s")
        for one in json.loads(done.stdout)["deployments"]:
            print(f"  {one['deployment']}: served in {one['seconds']:.1f} s (as measured by up)")
        for model in OWN:
            one_token(ENDPOINT, model)  # warm both paths once
            through, direct = added_latency(model, args.requests)
            print(
                f"{model}: median {through * 1000:.1f} ms through the endpoint, {direct * 1000:.1f} ms "
                f"direct, added {(through - direct) * 1000:.1f} ms ({args.requests} each, alternating)"
            )
        if not args.keep:
            cli("down", spec, "--grace", "5", env=ENV)


if __name__ == "__main__":
    main()
