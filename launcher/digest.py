"""sha256, without loading OpenSSL: `hashlib` loads libcrypto when imported, a twentieth of
`spark-launch plan`'s start, to hash a few kilobytes (a plan, a model's config.json, a
manifest's listing). The interpreter's own sha256 gives the same digest, at a quarter of
OpenSSL's speed per byte: loading OpenSSL costs more up to about a megabyte. What is hashed by
the megabyte (model files, on the nodes) uses hashlib. As the standard library's `random`
does, hashlib's is the fallback for a build without the built-in one."""

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
