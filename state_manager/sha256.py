"""``sha256_of(*parts) = SHA-256(parts[0] ‖ parts[1] ‖ …)``: the hash under every state-tree
formula (``hash_tree``, ``labeled_trie``, certified slices).

The C helper ``state_manager._sha256`` (built by ``setup.py`` against OpenSSL) computes it
without hashlib's per-call context setup, which is most of the cost of a 50–100 byte hash;
where it was not built, hashlib computes the very same digest. ``IMPLEMENTATION`` says which.
"""

from __future__ import annotations

import hashlib

__all__ = ["sha256_of", "sha256_of_hashlib", "IMPLEMENTATION"]


def sha256_of_hashlib(*parts: bytes) -> bytes:
    """``SHA-256(parts[0] ‖ parts[1] ‖ …)`` with hashlib (the reference and the fallback)."""
    return hashlib.sha256(b"".join(parts)).digest()


try:
    from state_manager._sha256 import sha256_of
    IMPLEMENTATION = "openssl"
except ImportError:  # not built (no C compiler or OpenSSL headers, or SUBNET_REPLICA_PURE_PYTHON=1)
    sha256_of = sha256_of_hashlib
    IMPLEMENTATION = "hashlib"
