"""Catch-up: answering a peer's ``Status`` with what it lacks, and taking a ``CatchUp`` (pure).

A part of ``AgreementNode`` (a mixin: the tables it reads are the node's, listed below).

* A ``Status`` from a peer whose finalized height is below ours is answered with every
  finalized block it lacks at once, in ``CatchUp`` chunks of at most ``max_catch_up_blocks``
  each ending at a height whose finalization proof we hold (one round trip, however far
  behind), then with the notarized blocks above (proposal and shares, at most
  ``lookahead_heights``). A peer below our retained tail gets nothing
  (``catch_up_not_retained``): it needs state sync.
* A ``CatchUp`` is taken when its blocks continue our finalized chain (parent hashes link up
  from our tip) and its last block carries a quorum of valid finalization signatures, which
  finalize it and, through the hashes, every block below. Chunks of one answer may overtake
  each other: up to ``MAX_EARLY_CATCH_UPS`` that start above our tip wait for their turn.
"""

from __future__ import annotations

from typing import Optional

from ..block import Block, block_hash
from .candidate import Candidate
from .interface import AgreementConfig, Output, Send, Verifier
from .messages import CatchUp, NotarizationShare, Status
from .signing import compute_finalization_message

__all__ = ["MAX_EARLY_CATCH_UPS", "CatchUpMixin"]

#: Chunks that arrived before their turn, kept per node (more are dropped and asked for again).
MAX_EARLY_CATCH_UPS = 32


class CatchUpMixin:
    """Status answers and catch-up intake of ``AgreementNode`` (module docstring). Calls the
    node's ``_heard``, ``_count`` and ``_finalize``."""

    # the node's state this part reads (and, for the early chunks, owns)
    config: AgreementConfig
    node_id: str
    finalized_height: int
    finalized_hash: bytes
    notarized_height: int
    _members: frozenset[str]
    _quorum: int
    _verifier: Verifier
    _chain: dict[int, tuple[Block, bytes]]
    _proofs: dict[int, tuple[tuple[str, bytes], ...]]
    _candidates: dict[bytes, Candidate]
    _notarization: dict[int, dict[bytes, dict[str, bytes]]]
    _notarized: dict[int, dict[bytes, None]]
    _early_catch_ups: dict[int, CatchUp]

    def _on_status(self, status: Status, out: list[Output]) -> None:
        peer = status.sender
        if peer not in self._members or peer == self.node_id:
            return
        self._heard(peer)   # the transport authenticated the sender
        if status.finalized_height < self.finalized_height:
            # everything it lacks, in chunks, at once: one round trip however far behind
            first = next_height = status.finalized_height + 1
            while next_height <= self.finalized_height:
                catch_up = self._catch_up_from(next_height)
                if catch_up is None:
                    break
                out.append(Send(peer, catch_up))
                next_height = catch_up.last.height + 1
            if next_height == first:
                self._count("catch_up_not_retained")
                return
            if next_height <= self.finalized_height:
                return   # the notarized blocks would be out of its reach; it asks again
        # the notarized chain above what the peer has (at most the lookahead)
        first = max(status.notarized_height, self.finalized_height) + 1
        last = min(self.notarized_height, first + self.config.lookahead_heights - 1)
        for height in range(first, last + 1):
            for digest in self._notarized.get(height, {}):
                out.append(Send(peer, self._candidates[digest].proposal))
                for signer, signature in self._notarization[height][digest].items():
                    out.append(Send(peer, NotarizationShare(height, digest, signer, signature)))

    def _catch_up_from(self, height: int) -> Optional[CatchUp]:
        """Blocks ``height ..`` up to a proven height (at most ``max_catch_up_blocks``)."""
        if height not in self._chain:
            return None
        limit = height + self.config.max_catch_up_blocks - 1
        proven = [h for h in self._proofs if height <= h <= limit]
        top = max(proven) if proven else None
        if top is None:
            return None
        blocks = tuple(self._chain[h][0] for h in range(height, top + 1))
        return CatchUp(blocks, self._proofs[top])

    def _on_catch_up(self, catch_up: CatchUp, out: list[Output]) -> None:
        if catch_up.last.height <= self.finalized_height:
            return
        # the blocks must continue our chain: keep those above our tip, check the links
        above = [b for b in catch_up.blocks if b.height > self.finalized_height]
        if above[0].height != self.finalized_height + 1:
            # chunks of one answer may overtake each other: keep a few until their turn
            self._count("catch_up_gap")
            if len(self._early_catch_ups) < MAX_EARLY_CATCH_UPS:
                self._early_catch_ups[above[0].height] = catch_up
            return
        parent = self.finalized_hash
        digests = []
        for block in above:
            if block.parent_hash != parent:
                self._count("catch_up_broken_chain")
                return
            parent = block_hash(block)
            digests.append(parent)
        top = catch_up.last
        message = compute_finalization_message(top.height, digests[-1])
        valid = [(s, sig) for s, sig in catch_up.signatures
                 if s in self._members and self._verifier.is_valid_signature(s, message, sig)]
        if len(valid) < self._quorum:
            self._count("catch_up_not_finalized")
            return
        self._finalize(list(zip(above, digests)), tuple(valid), out)
        for first in sorted(self._early_catch_ups):   # a kept chunk whose turn has come
            if first <= self.finalized_height + 1:
                self._on_catch_up(self._early_catch_ups.pop(first), out)
                break
        for first in [h for h in self._early_catch_ups if h <= self.finalized_height]:
            del self._early_catch_ups[first]
