"""Own artifacts and restarts: what a node signed, and how it starts again (pure).

A part of ``AgreementNode`` (a mixin: the tables it reads and writes are the node's, listed
below).

* Every artifact the node signs (proposal, notarization share, finalization share) is kept
  above the finalized tip, handed to the shell to make durable (``Persist``, before anything
  after it is acted on) and broadcast; every ``rebroadcast_interval`` it is re-sent with what
  else peers need to reach our view (``_artifacts_to_resend``).
* ``AgreementNode.restore``: a restarted node gets back its retained finalized tail (the last
  entry carrying its proof) and the artifacts it had persisted, so the safety guards hold
  across the restart: it never signs a second block at a height it signed.
* ``AgreementNode.from_synced_tip``: a node that installed a certified checkpoint by state
  sync starts at that finalized tip without holding its block.
"""

from __future__ import annotations

from typing import Iterable, Self, Sequence

from ..block import Block, block_hash
from ..registry import SubnetRecord
from .candidate import Candidate
from .certification import CertificationAggregator
from .interface import AgreementConfig, AgreementConfigError, Broadcast, Finalized, Output, Persist
from .messages import FinalizationShare, Message, NotarizationShare, Proposal
from .signing import compute_finalization_message, compute_notarization_message

__all__ = ["RestoreMixin", "own_key"]


class RestoreMixin:
    """Own artifacts and restarts of ``AgreementNode`` (module docstring). Calls the node's
    ``_on_proposal`` and ``_on_share``."""

    # the node's state this part reads and writes
    finalized_height: int
    finalized_hash: bytes
    notarized_height: int
    node_id: str
    _subnet: SubnetRecord
    _chain: dict[int, tuple[Block, bytes]]
    _proofs: dict[int, tuple[tuple[str, bytes], ...]]
    _chain_low: int
    _candidates: dict[bytes, Candidate]
    _notarization: dict[int, dict[bytes, dict[str, bytes]]]
    _finalization: dict[int, dict[bytes, dict[str, bytes]]]
    _notarized: dict[int, dict[bytes, None]]
    _signed_notarization: dict[int, dict[bytes, int]]
    _signed_finalization: dict[int, bytes]
    _own: dict[tuple[int, int, bytes], Message]
    _proposed: dict[int, bytes]
    _certification: CertificationAggregator

    def _emit_own(self, message: Message, out: list[Output]) -> None:
        self._own[own_key(message)] = message
        out.append(Persist(message))
        out.append(Broadcast(message))

    def _artifacts_to_resend(self) -> list[Message]:
        """What peers need to reach our view above the finalized tip, if they lost it:

        * our own artifacts;
        * the proposals of others we notarization-signed: if their maker crashed after
          reaching only us, peers could otherwise never sign the block we signed, and we
          (having signed a lower rank) would never sign theirs;
        * every notarization we know (block and shares): a share whose signer crashed may
          have reached only some nodes, and a block whose parent they do not see notarized
          they cannot sign.
        """
        out = [m for k, m in sorted(self._own.items(), key=lambda item: item[0]) if k[0] > self.finalized_height]
        sent = {own_key(m) for m in out}
        proposals: dict[bytes, None] = {}
        for height in sorted(self._signed_notarization):
            proposals.update((d, None) for d in self._signed_notarization[height] if d in self._candidates)
        for height in range(self.finalized_height + 1, self.notarized_height + 1):
            for digest in self._notarized.get(height, {}):
                proposals[digest] = None
                out += [NotarizationShare(height, digest, signer, signature)
                        for signer, signature in self._notarization[height][digest].items()
                        if (height, 1, digest) not in sent or signer != self.node_id]
        out += [self._candidates[d].proposal for d in proposals if self._candidates[d].block.maker != self.node_id]
        return out

    def _start_at_synced_tip(self, height: int, block_hash: bytes) -> None:
        if type(height) is not int or not 1 <= height < 2**64:
            raise AgreementConfigError(f"a synced tip height must be in [1, 2**64), got {height!r}")
        if not isinstance(block_hash, bytes) or len(block_hash) != 32:
            raise AgreementConfigError("a synced tip's block hash must be 32 bytes")
        self.finalized_height, self.finalized_hash = height, block_hash
        self._chain_low = height + 1      # nothing retained: _catch_up_from(<= height) is None
        self._certification.certified_height = height   # the installed state is certified

    def _restore(self, finalized: Sequence[Finalized], own_artifacts: Iterable[Message]) -> None:
        if finalized:
            last = finalized[-1]
            if not last.proof:
                raise AgreementConfigError("the last finalized block must carry its proof")
            for earlier, later in zip(finalized, finalized[1:]):
                if later.height != earlier.height + 1 or later.block.parent_hash != earlier.block_hash:
                    raise AgreementConfigError(f"finalized blocks do not chain at height {later.height}")
            self._chain_low = finalized[0].height
            for entry in finalized:
                self._chain[entry.height] = (entry.block, entry.block_hash)
                if entry.proof:
                    self._proofs[entry.height] = entry.proof
            self.finalized_height, self.finalized_hash = last.height, last.block_hash
        for message in own_artifacts:
            if isinstance(message, Proposal):
                height = message.block.height
                if height > self.finalized_height:
                    self._proposed[height] = block_hash(message.block)
                    self._own[own_key(message)] = message
                    self._on_proposal(message, own=True)
            elif isinstance(message, NotarizationShare) and message.height > self.finalized_height:
                # the rank is not in the share; _best_signed_rank reads it from the block once known
                self._signed_notarization.setdefault(message.height, {})[message.block_hash] = self._subnet.size
                self._own[own_key(message)] = message
                self._on_share(message, self._notarization, compute_notarization_message, "notarization", own=True)
            elif isinstance(message, FinalizationShare) and message.height > self.finalized_height:
                self._signed_finalization[message.height] = message.block_hash
                self._own[own_key(message)] = message
                self._on_share(message, self._finalization, compute_finalization_message, "finalization", own=True)

    @classmethod
    def restore(cls, config: AgreementConfig, *, finalized: Sequence[Finalized], own_artifacts: Iterable[Message],
                **kwargs) -> Self:
        """A restarted node: its retained finalized tail and the artifacts it had persisted."""
        return cls(config, finalized=finalized, own_artifacts=own_artifacts, **kwargs)

    @classmethod
    def from_synced_tip(cls, config: AgreementConfig, *, height: int, block_hash: bytes,
                        own_artifacts: Iterable[Message] = (), **kwargs) -> Self:
        """A node that installed the (verified) certified state of ``height`` by state sync:
        its finalized tip is ``(height, block_hash)`` — ``block_hash`` the hash of the
        finalized block at ``height`` — but it holds neither that block nor any below.

        Its retained chain starts empty at ``height + 1``: it continues only with blocks that
        chain from ``block_hash`` (a ``CatchUp`` of ``height + 1 ..`` with a quorum's
        finalization, or proposals and shares of the live rounds); a ``CatchUp`` that does not
        is refused and counted (``catch_up_broken_chain``). Peers behind ``height`` get no
        catch-up from it (``catch_up_not_retained``). The ``BlockContext`` of ``height + 1``
        has ``parent=None`` (the block is not held; this is not genesis: its ``tip`` says
        so). Certification shares of heights ``<= height`` are ignored: that state is
        certified already. Own artifacts at heights ``<= height`` are dropped.

        ``block_hash`` is not checked here against anything (a certification covers the
        state, not the block): a wrong one only makes every catch-up be refused. After a
        restart before any new block was finalized, start from the synced tip again; after
        one, ``restore`` from the finalized tail above it."""
        return cls(config, synced_tip=(height, block_hash), own_artifacts=own_artifacts, **kwargs)


def own_key(message: Message) -> tuple[int, int, bytes]:
    """The slot a signed artifact fills: ``(height, 0, b"")`` for a proposal (one per height),
    ``(height, 1 | 2, block hash)`` for a notarization | finalization share."""
    if isinstance(message, Proposal):
        return (message.block.height, 0, b"")
    kind = 1 if isinstance(message, NotarizationShare) else 2
    return (message.height, kind, message.block_hash)  # type: ignore[union-attr]
