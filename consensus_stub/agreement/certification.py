"""Certification inside agreement: the subnet's certification shares of executed heights,
aggregated into one certification per height (pure).

Nodes gossip their shares with the agreement messages (``CertificationShareGossip``); every
node aggregates them (``CertificationPool``: ``t`` shares of one root make the subnet's
threshold signature) and reports each certification it makes once (the protocol's
``Certified`` output). Heights at or below the last certified height are ignored: their state
is certified already (or was installed certified by state sync).
"""

from __future__ import annotations

from typing import Optional

from state_manager.certification import Certification, CertificationShare, SignatureMemo

from ..certification_pool import CertificationPool
from ..registry import SubnetRecord

__all__ = ["CertificationAggregator"]


class CertificationAggregator:
    """One node's aggregation of its subnet's certification shares (module docstring)."""

    __slots__ = ("_subnet", "_memo", "_pool", "certified_height")

    def __init__(self, subnet: SubnetRecord, memo: Optional[SignatureMemo] = None) -> None:
        self._subnet = subnet
        self._memo = memo   # verified BLS signatures: a cache, never a decision
        self._pool: Optional[CertificationPool] = None   # made with the first share
        #: The highest height certified (shares at or below it are ignored).
        self.certified_height = 0

    def add(self, share: CertificationShare) -> Optional[Certification]:
        """Add ``share``; the certification of its height if this share completed it."""
        if share.height <= self.certified_height:
            return None
        if self._pool is None:
            self._pool = CertificationPool(self._subnet, self._memo)
        certification = self._pool.add_share(share)
        if certification is not None:
            self.certified_height = certification.height
            self._pool.purge_below(certification.height + 1)
        return certification
