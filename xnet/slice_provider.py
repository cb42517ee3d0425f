"""Serving certified stream slices from the latest certified snapshot (pure).

``CertifiedSliceProvider`` is the ``SliceProvider`` an XNet endpoint serves from. It reads
``latest_certified()`` once per request — an immutable ``(StateTrees, Certification)`` pair
that the state manager replaces whole after each certification — so a request is answered
from one consistent snapshot while the next round runs. It raises the encoder's own errors,
which the endpoint maps to status codes (``xnet.grpc.server``):

    nothing certified yet, no stream, our own subnet  → NoStream
    indices outside [header.begin, header.end]       → IndexOutOfRange
    malformed request fields                         → InvalidSliceRequest
"""

from __future__ import annotations

from typing import Callable, Optional

from state_manager import certified_slice as cs
from state_manager.certification import Certification
from state_manager.state_tree import StateTrees

__all__ = ["CertifiedSliceProvider", "LatestCertified"]

LatestCertified = Callable[[], Optional[tuple[StateTrees, Certification]]]


class CertifiedSliceProvider:
    """Answers ``GetStreamSlice`` / ``ListStreams`` for subnet ``own_subnet``."""

    def __init__(self, own_subnet: str, latest_certified: LatestCertified) -> None:
        self.own_subnet = own_subnet
        self._latest_certified = latest_certified

    def latest(self) -> Optional[tuple[StateTrees, Certification]]:
        """The snapshot requests are answered from now (``None`` before the first certification)."""
        return self._latest_certified()

    def _snapshot(self) -> tuple[StateTrees, Certification]:
        latest = self._latest_certified()
        if latest is None:
            raise cs.NoStream("no state has been certified yet")
        return latest

    def get_stream_slice(
        self, subnet: str, witness_begin: int, msg_begin: int, msg_limit: int, byte_limit: int
    ) -> bytes:
        """The certified slice of our stream to ``subnet`` (``encode_certified_stream_slice``)."""
        if subnet == self.own_subnet:
            raise cs.NoStream("loopback streams are never served")
        trees, certification = self._snapshot()
        return cs.encode_certified_stream_slice(
            trees.certified, certification, subnet, witness_begin, msg_begin, msg_limit, byte_limit)

    def list_streams(self) -> list[str]:
        """The subnets our latest certified state has streams to (without our own)."""
        latest = self._latest_certified()
        if latest is None:
            return []
        streams = latest[0].certified.get_subtree(cs.STREAMS_LABEL)
        if streams is None:
            return []
        names = (label.decode("utf-8", "replace") for label, _ in streams.items())
        return sorted(name for name in names if name != self.own_subnet)
