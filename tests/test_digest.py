"""launcher.digest: the interpreter's own sha256, the digest hashlib gives, without OpenSSL."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from launcher.digest import sha256


@pytest.mark.parametrize("data", [b"", b"abc", bytes(range(256)) * 4099, "plan ✓".encode()])
def test_the_same_digest_as_hashlib(data: bytes) -> None:
    assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    both = sha256(data[:7])
    both.update(data[7:])
    assert both.digest() == hashlib.sha256(data).digest()


def test_it_loads_no_openssl() -> None:
    code = (
        "import sys, launcher.digest as d; d.sha256(b'x');"
        " print(sorted({'hashlib', '_hashlib'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
