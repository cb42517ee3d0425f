"""The ``blst`` module ``icp-py-core``'s certificate code imports, over pyblst.

icp-py-core 2.3.1 verifies BLS signatures only through the official blst Python binding
(``import blst``: ``P1_Affine``, ``P2_Affine``, ``core_verify``, ``Pairing``, ``BLST_SUCCESS``),
which is built from blst's sources with SWIG and is not on PyPI (the package's ``bls`` extra
names a ``blst`` distribution that does not exist there). This module offers those names with
the same meaning over pyblst, a binding of the same C library. Everything else stays the
library's own: the message it builds, the ciphersuite tag it passes, the key it takes from the
delegation, what it does with a failure. Install it for a test with
``monkeypatch.setitem(sys.modules, "blst", blst_standin)`` (the library imports ``blst``
anew at every verification).
"""

from __future__ import annotations

import pyblst

from state_manager.bls import public_key_of

BLST_SUCCESS = 0
BLST_BAD_ENCODING = 1
BLST_VERIFY_FAIL = 5

_G2_GENERATOR = pyblst.BlstP2Element().uncompress(public_key_of((1).to_bytes(32, "big")))   # 1 · g2


class BlstError(ValueError):
    """Bytes that are no point of the group (the binding raises as well)."""


def _point(cls: type, data: object, size: int) -> object:
    if not isinstance(data, (bytes, bytearray)) or len(data) != size:
        raise BlstError(f"a compressed point here is {size} bytes")
    try:
        point = cls().uncompress(bytes(data))
    except Exception as exc:   # pyblst raises its own types for off-curve or malformed input
        raise BlstError(f"not a point: {exc}") from exc
    if point == cls():
        raise BlstError("the point at infinity")
    return point


class P1_Affine:
    """A G1 point (a signature in the IC's variant) from its 48 compressed bytes."""

    def __init__(self, compressed: bytes) -> None:
        self.point = _point(pyblst.BlstP1Element, compressed, 48)

    def core_verify(self, pk: "P2_Affine", hash_or_encode: bool, msg: bytes, dst: bytes, aug: bytes | None = None) -> int:
        """``e(self, g2) == e(H(msg), pk)``, with ``H`` hash-to-G1 under ``dst``."""
        if not hash_or_encode or aug:
            raise NotImplementedError("only hash-to-curve without augmentation, as icp-py-core uses it")
        return BLST_SUCCESS if _pairs_match(self, pk, msg, dst) else BLST_VERIFY_FAIL


class P2_Affine:
    """A G2 point (a public key in the IC's variant) from its 96 compressed bytes."""

    def __init__(self, compressed: bytes) -> None:
        self.point = _point(pyblst.BlstP2Element, compressed, 96)


def _pairs_match(signature: P1_Affine, key: P2_Affine, msg: bytes, dst: bytes) -> bool:
    hashed = pyblst.BlstP1Element().hash_to_group(bytes(msg), bytes(dst))
    return bool(pyblst.final_verify(pyblst.miller_loop(signature.point, _G2_GENERATOR),
                                    pyblst.miller_loop(hashed, key.point)))


class Pairing:
    """The one-signature use of blst's ``Pairing`` (icp-py-core's fallback path)."""

    def __init__(self, hash_or_encode: bool, dst: bytes) -> None:
        if not hash_or_encode:
            raise NotImplementedError("only hash-to-curve, as icp-py-core uses it")
        self.dst = bytes(dst)
        self.items: list[tuple[P2_Affine, P1_Affine, bytes]] = []

    def aggregate(self, pk: P2_Affine, sig: P1_Affine, msg: bytes, aug: bytes | None = None) -> int:
        if aug:
            raise NotImplementedError("no augmentation")
        self.items.append((pk, sig, bytes(msg)))
        return BLST_SUCCESS

    def commit(self) -> None:
        return None

    def finalverify(self, gtsig: object = None) -> bool:
        return len(self.items) == 1 and _pairs_match(self.items[0][1], self.items[0][0], self.items[0][2], self.dst)
