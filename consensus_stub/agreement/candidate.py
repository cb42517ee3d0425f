"""A block a node holds above its finalized tip, and the node's verdict on it (pure).

The protocol's rounds (``protocol``), its catch-up answers (``catch_up``) and its own
artifacts (``restore``) all read candidates; they live here, below the three.
"""

from __future__ import annotations

from .messages import Proposal

__all__ = ["PENDING", "VALID", "INVALID", "Candidate"]

#: The node's verdict on a candidate: not validated yet, valid, refused for good.
PENDING, VALID, INVALID = 0, 1, 2


class Candidate:
    __slots__ = ("proposal", "block", "digest", "verdict")

    def __init__(self, proposal: Proposal, digest: bytes, verdict: int) -> None:
        self.proposal = proposal
        self.block = proposal.block
        self.digest = digest
        self.verdict = verdict
