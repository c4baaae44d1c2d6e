"""sha256, without loading OpenSSL: `hashlib` loads libcrypto when imported, a twentieth of
`spark-launch plan`'s start, to hash a few hundred bytes. The interpreter's own sha256 gives
the same digest; as the standard library's `random` does, hashlib's is the fallback for a
build without it."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # one type for all three
    from hashlib import sha256
else:
    try:
        from _sha2 import sha256  # Python 3.12 and later
    except ImportError:
        try:
            from _sha256 import sha256  # Python 3.11
        except ImportError:  # a build without the built-in hashes
            from hashlib import sha256

__all__ = ["sha256"]
