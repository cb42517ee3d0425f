"""A hostile XNet endpoint: a node whose slice provider is wrapped to misbehave.

``HostileProvider(inner, mode)`` answers from the node's honest provider and then spoils
the answer according to ``mode``. Modes that need a *validly signed* lie (regressing or
overreaching signals) get a ``Forger``: the test holds every secret share of the serving
subnet, so it can certify a modified state tree as a subnet of colluding nodes would.
``misbehaved`` counts answers that differed from the honest one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from typing import Iterable

from consensus_stub.genesis import NodeSecrets
from consensus_stub.registry import SubnetRecord
from state_manager import bls
from state_manager.certification import (
    Certification, aggregate_certification, certification_message, decode_certification, encode_certification,
    sign_certification_share,
)
from state_manager.certified_slice import (
    IndexOutOfRange, decode_valid_certified_stream_slice, encode_certified_stream_slice,
)
from state_manager.codec import decode_header_leaf, encode_header_leaf
from state_manager.encoding import decode, encode
from state_manager.labeled_trie import LabeledTrie
from xnet.slice_provider import CertifiedSliceProvider

MODES = (
    "forged_signature", "tampered_witness", "relabeled_height", "replay", "gap", "overlap", "signals_regress",
    "signals_beyond", "oversized", "garbage", "hang",
)


class Forger:
    """Certifies arbitrary state trees with a subnet's threshold key (all shares known)."""

    def __init__(self, record: SubnetRecord, secrets: Iterable[NodeSecrets]) -> None:
        self.record = record
        self.secrets = sorted(secrets, key=lambda s: s.node_index)[: record.threshold]

    def certify(self, tree: LabeledTrie, height: int) -> Certification:
        root = tree.digest()
        shares = [sign_certification_share(height, root, s.node_index, s.secret_share) for s in self.secrets]
        return aggregate_certification(shares, self.record.threshold, self.record.public_key,
                                       self.record.key_shares_by_index())

    def with_header(self, tree: LabeledTrie, dst: str, change) -> LabeledTrie:
        """``tree`` with ``/streams/<dst>/header`` replaced by ``change(header)``."""
        streams = tree[b"streams"]
        stream = streams[dst.encode()]
        header = change(decode_header_leaf(stream[b"header"]))
        stream = stream.insert(b"header", encode_header_leaf(header))
        return tree.insert(b"streams", streams.insert(dst.encode(), stream))


def _split(data: bytes) -> list:
    return list(decode(data))


def _forge_signature(data: bytes) -> bytes:
    parts = _split(data)
    cert = decode_certification(parts[3])
    secret = (int.from_bytes(hashlib.sha256(b"not the subnet key").digest(), "big") % bls.BLS12_381_R).to_bytes(32, "big")
    signature = bls.sign_share(secret, certification_message(cert.root))
    parts[3] = encode_certification(Certification(cert.height, cert.root, signature))
    return encode(tuple(parts))


def _relabel_height(data: bytes, height: int = 2**63) -> bytes:
    """The honest answer with its certification claiming ``height`` (same signature)."""
    parts = _split(data)
    cert = decode_certification(parts[3])
    parts[3] = encode_certification(Certification(height, cert.root, cert.signature))
    return encode(tuple(parts))


def _tamper_witness(data: bytes) -> bytes:
    parts = _split(data)
    witness = bytearray(parts[2])
    marker = witness.find(b"\x92\x04\xc4\x20")   # the first Pruned(32-byte digest)
    if marker < 0:
        return data
    witness[marker + 4] ^= 0x01
    parts[2] = bytes(witness)
    return encode(tuple(parts))


class HostileProvider:
    def __init__(self, inner: CertifiedSliceProvider, mode: str, *, max_response_bytes: int = 1024 * 1024) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        self.inner = inner
        self.mode = mode
        self.forger: Forger | None = None
        self.release = threading.Event()
        self.max_response_bytes = max_response_bytes
        self.misbehaved = 0
        self._first: bytes | None = None
        self._lock = threading.Lock()

    def list_streams(self) -> list[str]:
        return self.inner.list_streams()

    def get_stream_slice(self, subnet: str, witness_begin: int, msg_begin: int, msg_limit: int, byte_limit: int) -> bytes:
        honest = self.inner.get_stream_slice(subnet, witness_begin, msg_begin, msg_limit, byte_limit)
        answer = self._spoil(honest, subnet, witness_begin, msg_begin, msg_limit, byte_limit)
        if answer != honest:
            with self._lock:
                self.misbehaved += 1
        return answer

    def _spoil(self, honest: bytes, subnet: str, witness_begin: int, msg_begin: int, msg_limit: int,
               byte_limit: int) -> bytes:
        mode = self.mode
        if mode == "forged_signature":
            return _forge_signature(honest)
        if mode == "tampered_witness":
            return _tamper_witness(honest)
        if mode == "relabeled_height":
            return _relabel_height(honest)
        if mode == "replay":
            with self._lock:
                if self._first is None and decode_valid_certified_stream_slice(honest).messages:
                    self._first = honest
                return self._first or honest
        if mode == "gap":
            try:
                return self.inner.get_stream_slice(subnet, msg_begin + 1, msg_begin + 1, msg_limit, byte_limit)
            except IndexOutOfRange:
                return honest
        if mode == "overlap":
            if msg_begin == 0:
                return honest
            try:
                return self.inner.get_stream_slice(subnet, min(witness_begin, msg_begin - 1), msg_begin - 1,
                                                   msg_limit, byte_limit)
            except IndexOutOfRange:
                return honest
        if mode in ("signals_regress", "signals_beyond"):
            return self._forged_signals(subnet, witness_begin, msg_begin, msg_limit, byte_limit, honest)
        if mode == "oversized":
            return b"\x00" * (2 * self.max_response_bytes)
        if mode == "garbage":
            return hashlib.sha256(honest).digest() * 40
        if mode == "hang":
            with self._lock:
                self.misbehaved += 1
            self.release.wait(10)
            return honest
        raise AssertionError(mode)

    def _forged_signals(self, subnet: str, witness_begin: int, msg_begin: int, msg_limit: int, byte_limit: int,
                        honest: bytes) -> bytes:
        latest = self.inner.latest()
        if latest is None or self.forger is None:
            return honest
        trees, certification = latest
        if self.mode == "signals_regress":
            change = lambda h: dataclasses.replace(h, signals_end=0, reject_signals=())  # noqa: E731
        else:
            change = lambda h: dataclasses.replace(h, signals_end=h.signals_end + 1000)  # noqa: E731
        tree = self.forger.with_header(trees.certified, subnet, change)
        forged = self.forger.certify(tree, certification.height)
        return encode_certified_stream_slice(tree, forged, subnet, witness_begin, msg_begin, msg_limit, byte_limit)
