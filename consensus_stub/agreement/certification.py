"""Certification inside agreement: the subnet's certification shares of executed heights,
aggregated into one certification per height (pure).

Nodes gossip their shares with the agreement messages (``CertificationShareGossip``); every
node aggregates them (``CertificationPool``: ``t`` shares of one root make the subnet's
threshold signature) and reports each certification it makes once (the protocol's
``Certified`` output). Heights at or below the last certified height are ignored: their state
is certified already (or was installed certified by state sync).

A share counts only if its height witness proves its height (``check_share_height``): the
signature covers the root alone (the IC's message), so without the proof ``t`` honest shares
of one height, relabeled by any peer, would combine into a certification of another height
that verifies (docs/architecture.md, *Certifications*). Shares without that proof are
refused and counted (``refused_shares``), before they are tallied.

Every share is also tallied (``divergence.ShareTally``), late ones included: who signed which
root at a height (``shares_at``: verified shares only) is what a diverged node reports, and
an uncertified height past which the subnet kept finalizing is a stall (``stall``).
"""

from __future__ import annotations

from typing import Optional

from state_manager.certification import (
    Certification, CertificationError, CertificationShare, CertifiedHeightError, SignatureMemo, check_share_height,
    verify_certification_share,
)

from ..certification_pool import CertificationPool
from ..registry import SubnetRecord
from .divergence import CertificationStall, SharesAtHeight, ShareTally, group_shares

__all__ = ["CertificationAggregator"]


class CertificationAggregator:
    """One node's aggregation of its subnet's certification shares (module docstring)."""

    __slots__ = ("_subnet", "_memo", "_pool", "certified_height", "tally", "refused_shares")

    def __init__(self, subnet: SubnetRecord, memo: Optional[SignatureMemo] = None) -> None:
        self._subnet = subnet
        self._memo = memo   # verified BLS signatures: a cache, never a decision
        self._pool: Optional[CertificationPool] = None   # made with the first share
        #: The highest height certified (shares at or below it are ignored).
        self.certified_height = 0
        #: Every share by height, for ``shares_at`` and ``stall``.
        self.tally = ShareTally()
        #: Shares whose height witness did not prove their height.
        self.refused_shares = 0

    def add(self, share: CertificationShare) -> Optional[Certification]:
        """Add ``share``; the certification of its height if this share completed it."""
        try:
            check_share_height(share)
        except CertifiedHeightError:
            self.refused_shares += 1
            return None
        self.tally.add(share)
        if share.height <= self.certified_height:
            return None
        if self._pool is None:
            self._pool = CertificationPool(self._subnet, self._memo)
        certification = self._pool.add_share(share)
        if certification is not None:
            self.certified_height = certification.height
            self.tally.certified(certification.height)
            self._pool.purge_below(certification.height + 1)
        return certification

    def shares_at(self, height: int) -> SharesAtHeight:
        """The tallied shares of ``height`` that verify under their node's key share, by root."""
        keys = self._subnet.key_shares_by_index()
        valid = []
        for share in self.tally.shares(height):
            key = keys.get(share.node_index)
            if key is None:
                continue
            try:
                verify_certification_share(share, key, self._memo)
            except CertificationError:
                continue
            valid.append(share)
        return group_shares(height, valid, self._subnet.node_ids)

    def stall(self, finalized_height: int, rounds: int) -> Optional[CertificationStall]:
        """The lowest uncertified height with shares that ``finalized_height`` is ``rounds``
        past, with who signed what there; ``None`` if there is none."""
        height = self.tally.stalled_height(finalized_height, rounds)
        if height is None:
            return None
        return CertificationStall(height, finalized_height, self._subnet.threshold, self.shares_at(height))
