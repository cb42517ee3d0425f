"""One node's side of agreement, as a state machine without I/O (sans-I/O, like h11).

The shell feeds it decoded messages and the time, ``on_message(msg, now)`` and
``on_timer(now)``, calls ``on_timer`` again at ``wakeup_at``, and carries out the outputs in
order: ``Persist`` (make durable *before* acting on any later output), ``Send``/``Broadcast``,
``Finalized`` (execute, store), ``IngressReceived``, ``Certified``, ``Refused`` (metrics).
Clocks, randomness, keys and block contents all come in from outside: ``propose`` and
``validate`` (the block maker and the notary), ``sign`` and ``verifier`` (node keys).

The protocol, for a subnet of ``n = 3f + 1`` nodes with quorum ``q = n - f = 2f + 1``:

* Heights advance on the **notarized** chain. ``N`` is the highest height with a notarized
  block whose ancestors down to the finalized tip are all notarized; the round is ``N + 1``
  and starts when the node learns of ``N``.
* **Block makers by rank**: at height ``h`` the node of rank ``r`` is
  ``node_ids[(h - 1 + r) mod n]`` (``block_maker_for``); it proposes ``r × round_timeout``
  (plus the pacing ``block_interval``) after the round starts, unless a valid block of lower
  rank is already there.
* **Notarization** (step one): a node signs a block of rank ``r`` once ``r × round_timeout``
  has passed, its parent is notarized, ``validate`` accepts it, and it has not signed a
  block of rank ``<= r`` at that height, nor finalization-signed the height. ``q`` shares
  notarize. (Ranks whose makers it has not heard from for ``absent_after_ns`` are not
  waited for, by makers and notaries alike: a down maker costs timeouts only until it
  counts as absent. Only liveness depends on that guess.)
* **Finalization** (step two): a node finalization-signs height ``h`` only if it
  notarization-signed exactly one block at ``h`` and that block is notarized; ``q`` shares
  finalize the block and, through the parent hashes, all its ancestors.
* **Catch-up**: every ``rebroadcast_interval`` a node broadcasts a ``Status`` and re-sends
  its own artifacts above the finalized tip and the proposals it signed (messages may be
  lost, makers may crash). A node ahead of a ``Status`` answers with the finalized blocks
  the sender lacks (``CatchUp``: hash chain + ``q`` finalization signatures on the last
  block) and the notarized blocks above. Peers keep ``retained_heights`` finalized blocks;
  a node further behind state-syncs (installs a peer's certified checkpoint of some height)
  and continues from that tip: ``AgreementNode.from_synced_tip``.

Why at most one block is final per height (crash faults, any delays): a finalized ``B``
has ``q`` finalization signers that signed no other block at ``h``, ever (the guards above,
kept across restarts through ``Persist``); any other block at ``h`` can then collect at most
``n - q = f < q`` notarization shares, so it is never notarized, and no block above ``h``
that does not descend from ``B`` has a notarized ancestry.

Determinism: decisions depend on the inputs and their order only; iteration is over dicts
filled in input order or over sorted keys, never sets.

Parts: this module holds the rounds (proposing, notarizing, finalizing, pruning);
``catch_up`` answers a ``Status`` and takes a ``CatchUp``; ``restore`` keeps, re-sends and
restores the node's own artifacts and starts it from a finalized tail or a synced tip;
``certification`` aggregates the subnet's certification shares.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence

from state_manager.certification import CertificationShare, SignatureMemo

from ..block import GENESIS_PARENT_HASH, Block, block_hash
from ..block_maker import ChainTip, block_maker_for, rank_of
from ..notary import BlockNotYetValid, InvalidBlock
from .candidate import INVALID, PENDING, VALID, Candidate
from .catch_up import CatchUpMixin
from .certification import CertificationAggregator
from .divergence import CertificationStall, SharesAtHeight
from .interface import (
    AgreementConfig, AgreementConfigError, BlockContext, Broadcast, Certified, Finalized, IngressReceived, Output,
    Persist, ProposeFn, Refused, Send, ValidateFn, Verifier, compute_quorum,
)
from .messages import (
    AgreementError, CatchUp, CertificationShareGossip, FinalizationShare, IngressGossip, Message, NotarizationShare,
    Proposal, Status,
)
from .restore import RestoreMixin
from .signing import compute_finalization_message, compute_notarization_message, compute_proposal_message

# The surface (``interface``) is re-exported: a driver needs only this module.
__all__ = [
    "AgreementConfig", "AgreementConfigError", "BlockContext", "Verifier", "ProposeFn", "ValidateFn",
    "compute_quorum", "Send", "Broadcast", "Persist", "Finalized", "IngressReceived", "Certified", "Refused",
    "Output", "AgreementNode",
]

class AgreementNode(CatchUpMixin, RestoreMixin):
    """One node's agreement state (module docstring). Not thread-safe: one driver at a time."""

    def __init__(
        self,
        config: AgreementConfig,
        *,
        propose: ProposeFn,
        validate: ValidateFn,
        sign: Callable[[bytes], bytes],
        verifier: Verifier,
        now: int,
        finalized: Sequence[Finalized] = (),
        own_artifacts: Iterable[Message] = (),
        signature_memo: Optional[SignatureMemo] = None,
        synced_tip: Optional[tuple[int, bytes]] = None,
    ) -> None:
        """A node at genesis, or (``restore``) at the end of ``finalized`` — a consecutive tail
        of the chain whose last entry carries its proof — with its persisted own artifacts,
        or (``from_synced_tip``) at a finalized tip it holds no block of."""
        self.config = config
        self.node_id = config.node_id
        self._subnet = config.subnet
        self._members = frozenset(config.subnet.node_ids)
        self._quorum = config.quorum
        self._propose_fn = propose
        self._validate_fn = validate
        self._sign = sign
        self._verifier = verifier
        # finalized chain (a retained tail) and the proofs of its explicitly finalized heights
        self.finalized_height = 0
        self.finalized_hash = GENESIS_PARENT_HASH
        self._chain: dict[int, tuple[Block, bytes]] = {}
        self._proofs: dict[int, tuple[tuple[str, bytes], ...]] = {}
        self._chain_low = 1
        # artifacts above the finalized tip
        self._candidates: dict[bytes, Candidate] = {}
        self._by_height: dict[int, dict[bytes, None]] = {}
        self._notarization: dict[int, dict[bytes, dict[str, bytes]]] = {}
        self._finalization: dict[int, dict[bytes, dict[str, bytes]]] = {}
        self._notarized: dict[int, dict[bytes, None]] = {}
        # what this node signed above the finalized tip (the safety guards)
        self._signed_notarization: dict[int, dict[bytes, int]] = {}   # height -> hash -> rank
        self._signed_finalization: dict[int, bytes] = {}
        self._own: dict[tuple[int, int, bytes], Message] = {}          # (height, kind, hash) -> artifact
        self._proposed: dict[int, bytes] = {}
        self._requested: dict[int, None] = {}   # heights we asked peers for missing blocks
        self._early_catch_ups: dict[int, CatchUp] = {}   # first height -> a chunk that came early
        self._last_heard = {n: now for n in config.subnet.node_ids if n != config.node_id}
        self._round_height = 0
        self._round_start = now
        self._now = now
        self._next_rebroadcast = now + config.rebroadcast_interval_ns
        self._certification = CertificationAggregator(config.subnet, signature_memo)
        #: Dropped or refused inputs per reason (deterministic order of first occurrence).
        self.counters: dict[str, int] = {}
        if synced_tip is not None:
            if finalized:
                raise AgreementConfigError("a node starts from a finalized tail or from a synced tip, not both")
            self._start_at_synced_tip(*synced_tip)
        self._restore(finalized, own_artifacts)
        self._enter_round(now)

    # -- inputs ---------------------------------------------------------------------------

    def start(self, now: int) -> list[Output]:
        """The first outputs after construction: a ``Status`` (peers answer with what we
        missed), our own artifacts again, and whatever is due."""
        out: list[Output] = [Broadcast(self.status())]
        out += [Broadcast(m) for m in self._artifacts_to_resend()]
        self._advance(now, out)
        return out

    def on_message(self, message: Message, now: int) -> list[Output]:
        """Handle one decoded message from a peer."""
        out: list[Output] = []
        self._now = max(self._now, now)
        if isinstance(message, Proposal):
            self._on_proposal(message)
        elif isinstance(message, NotarizationShare):
            self._on_share(message, self._notarization, compute_notarization_message, "notarization")
        elif isinstance(message, FinalizationShare):
            self._on_share(message, self._finalization, compute_finalization_message, "finalization")
        elif isinstance(message, Status):
            self._on_status(message, out)
        elif isinstance(message, CatchUp):
            self._on_catch_up(message, out)
        elif isinstance(message, IngressGossip):
            out.append(IngressReceived(message.messages))
        elif isinstance(message, CertificationShareGossip):
            self._on_certification_share(message.share, out)
        else:
            raise TypeError(f"not an agreement message: {type(message).__name__}")
        self._advance(now, out)
        return out

    def on_timer(self, now: int) -> list[Output]:
        """Time passed: propose, sign what became due, re-send when the interval is over."""
        out: list[Output] = []
        if now >= self._next_rebroadcast:
            self._next_rebroadcast = now + self.config.rebroadcast_interval_ns
            out.append(Broadcast(self.status()))
            out += [Broadcast(m) for m in self._artifacts_to_resend()]
        self._advance(now, out)
        return out

    def submit_ingress(self, messages: Sequence, now: int) -> list[Output]:
        """Gossip ingress this node admitted to its pool to every peer."""
        return [Broadcast(IngressGossip(tuple(messages)))] if messages else []

    def submit_certification_share(self, share: CertificationShare, now: int) -> list[Output]:
        """Our own certification share: aggregate it here too, and send it to every peer."""
        out: list[Output] = []
        self._on_certification_share(share, out)
        out.insert(0, Broadcast(CertificationShareGossip(share)))
        return out

    # -- reading --------------------------------------------------------------------------

    @property
    def notarized_height(self) -> int:
        height = self.finalized_height
        while self._notarized.get(height + 1):
            height += 1
        return height

    @property
    def wakeup_at(self) -> int:
        """When ``on_timer`` must run next (at the latest)."""
        times = [self._next_rebroadcast]
        height = self._round_height
        if height not in self._proposed:
            times.append(self._proposal_due(height))
        best_signed = self._best_signed_rank(height)
        for digest in self._by_height.get(height, {}):
            rank = self._candidates[digest].block.rank
            if rank < best_signed:
                times.append(self._notarization_due(height, rank))
        if self.config.absent_after_ns:   # a peer turning absent can make a rank due earlier
            times += [heard + self.config.absent_after_ns for heard in self._last_heard.values()]
        # Only deadlines ahead count: a due action that could not happen (a lower-rank block
        # is there, a validation was transient) waits for the rebroadcast, which is always
        # included, and is due at once when on_timer has not run since it passed.
        return min([times[0]] + [t for t in times[1:] if t > self._now])

    def status(self) -> Status:
        return Status(self.node_id, self.finalized_height, self.notarized_height)

    def finalized_block(self, height: int) -> Optional[tuple[Block, bytes]]:
        """A retained finalized block and its hash."""
        return self._chain.get(height)

    # -- the state machine ----------------------------------------------------------------

    def _heard(self, node_id: str) -> None:
        if node_id in self._last_heard:
            self._last_heard[node_id] = max(self._last_heard[node_id], self._now)

    def _count(self, reason: str) -> None:
        self.counters[reason] = self.counters.get(reason, 0) + 1

    def _is_tracked_height(self, height: int, what: str) -> bool:
        """Artifacts above the finalized tip and at most the lookahead above the notarized height;
        the rest is counted as ``<what>_stale`` (late duplicates, normal) or ``<what>_too_far_ahead``."""
        if height <= self.finalized_height:
            self._count(f"{what}_stale")
            return False
        if height > self.notarized_height + self.config.lookahead_heights:
            self._count(f"{what}_too_far_ahead")
            return False
        return True

    def _on_proposal(self, proposal: Proposal, *, own: bool = False) -> None:
        block = proposal.block
        if not self._is_tracked_height(block.height, "proposal"):
            return
        digest = block_hash(block)
        if digest in self._candidates:
            return
        if block.rank >= self._subnet.size or block.maker != block_maker_for(self._subnet, block.height, block.rank):
            self._count("proposal_wrong_maker")
            return
        if not own and not self._verifier.is_valid_signature(
                block.maker, compute_proposal_message(digest), proposal.signature):
            self._count("proposal_bad_signature")
            return
        self._heard(block.maker)
        self._candidates[digest] = Candidate(proposal, digest, VALID if own else PENDING)
        self._by_height.setdefault(block.height, {})[digest] = None

    def _on_share(self, share, pool: dict, message_of: Callable[[int, bytes], bytes], what: str,
                  *, own: bool = False) -> None:
        if not self._is_tracked_height(share.height, what):
            return
        if share.signer not in self._members:
            self._count(f"{what}_not_a_member")
            return
        signers = pool.setdefault(share.height, {}).setdefault(share.block_hash, {})
        if share.signer in signers:
            return
        if not own and not self._verifier.is_valid_signature(
                share.signer, message_of(share.height, share.block_hash), share.signature):
            self._count(f"{what}_bad_signature")
            return
        signers[share.signer] = share.signature
        self._heard(share.signer)

    def certification_shares(self, height: int) -> SharesAtHeight:
        """Who signed which root at ``height``, from the verified shares this node received."""
        return self._certification.shares_at(height)

    def certification_stall(self, rounds: int) -> Optional[CertificationStall]:
        """The lowest height not certified although ``rounds`` heights above it are final
        (``CertificationAggregator.stall``)."""
        return self._certification.stall(self.finalized_height, rounds)

    def _on_certification_share(self, share: CertificationShare, out: list[Output]) -> None:
        refused = self._certification.refused_shares
        certification = self._certification.add(share)
        if self._certification.refused_shares != refused:
            self._count("certification share without a height proof")
        if certification is not None:
            out.append(Certified(certification))

    # -- progress -------------------------------------------------------------------------

    def _advance(self, now: int, out: list[Output]) -> None:
        """Apply every rule until none applies (each is monotone, so this ends)."""
        self._now = max(self._now, now)
        while True:
            progressed = self._apply_finalizations(out) or self._apply_notarizations()
            self._enter_round(now)
            progressed = self._sign_finalizations(out) or progressed
            progressed = self._propose(now, out) or progressed
            progressed = self._sign_notarization(now, out) or progressed
            if not progressed:
                return

    def _best_signed_rank(self, height: int) -> int:
        """The lowest rank we notarization-signed at ``height`` (``n`` if none)."""
        ranks = [self._candidates[d].block.rank if d in self._candidates else rank
                 for d, rank in self._signed_notarization.get(height, {}).items()]
        return min(ranks, default=self._subnet.size)

    def _enter_round(self, now: int) -> None:
        height = self.notarized_height + 1
        if height != self._round_height:
            self._round_height, self._round_start = height, now

    def _parent_is_notarized(self, block: Block) -> bool:
        if block.height == self.finalized_height + 1:
            return block.parent_hash == self.finalized_hash
        return block.parent_hash in self._notarized.get(block.height - 1, {})

    def _apply_notarizations(self) -> bool:
        """A known block with ``q`` notarization shares and a notarized parent is notarized —
        at every height up to the round's, not only the next one: a node that saw one block
        notarized at ``h`` must still learn of a second, or it could not sign its children."""
        progressed = False
        height = self.finalized_height + 1
        while height <= self.notarized_height + 1:
            notarized = self._notarized.get(height, {})
            for digest, signers in self._notarization.get(height, {}).items():
                candidate = self._candidates.get(digest)
                if (len(signers) >= self._quorum and candidate is not None and digest not in notarized
                        and self._parent_is_notarized(candidate.block)):
                    notarized = self._notarized.setdefault(height, {})
                    notarized[digest] = None
                    progressed = True
            height += 1
        return progressed

    def _apply_finalizations(self, out: list[Output]) -> bool:
        """The highest block with ``q`` finalization shares whose chain down to our tip we hold."""
        for height in sorted(self._finalization, reverse=True):
            for digest, signers in self._finalization[height].items():
                if len(signers) < self._quorum:
                    continue
                chain = self._chain_down_to_tip(digest)
                if chain is None:
                    # finalized by peers, but we miss blocks below: ask (once per height)
                    if height not in self._requested:
                        self._requested[height] = None
                        out.append(Broadcast(self.status()))
                    continue
                self._finalize(chain, tuple(sorted(signers.items())), out)
                return True
        return False

    def _chain_down_to_tip(self, digest: bytes) -> Optional[list[tuple[Block, bytes]]]:
        """``[(block, hash)]`` from the finalized tip + 1 up to ``digest``, if we hold them all."""
        chain = []
        while True:
            candidate = self._candidates.get(digest)
            if candidate is None:
                return None
            chain.append((candidate.block, digest))
            if candidate.block.height == self.finalized_height + 1:
                return chain[::-1] if candidate.block.parent_hash == self.finalized_hash else None
            digest = candidate.block.parent_hash

    def _finalize(self, chain: list[tuple[Block, bytes]], proof: tuple[tuple[str, bytes], ...],
                  out: list[Output]) -> None:
        for index, (block, digest) in enumerate(chain):
            last = index == len(chain) - 1
            self._chain[block.height] = (block, digest)
            out.append(Finalized(block, digest, proof if last else ()))
        top, top_hash = chain[-1]
        self._proofs[top.height] = proof
        self.finalized_height, self.finalized_hash = top.height, top_hash
        self._prune()

    def _prune(self) -> None:
        tip = self.finalized_height
        for table in (self._by_height, self._notarization, self._finalization, self._notarized,
                      self._signed_notarization, self._signed_finalization, self._proposed, self._requested):
            for height in [h for h in table if h <= tip]:
                del table[height]
        self._candidates = {d: c for d, c in self._candidates.items() if c.block.height > tip}
        self._own = {k: m for k, m in self._own.items() if k[0] > tip}
        # notarized blocks above the tip count only on the finalized chain
        for height in sorted(self._notarized):
            kept = {d: None for d in self._notarized[height] if self._parent_is_notarized(self._candidates[d].block)}
            self._notarized[height] = kept
        # the retained tail: heights are consecutive, so drop from its low end (O(1) per height)
        while self._chain_low <= tip - self.config.retained_heights:
            self._chain.pop(self._chain_low, None)
            self._proofs.pop(self._chain_low, None)
            self._chain_low += 1

    def _sign_finalizations(self, out: list[Output]) -> bool:
        """Finalization-sign ``h`` if we notarization-signed exactly one block at ``h``, and it is notarized."""
        progressed = False
        for height in range(self.finalized_height + 1, self.notarized_height + 1):
            signed = self._signed_notarization.get(height, {})
            if height in self._signed_finalization or len(signed) != 1:
                continue
            (digest,) = signed
            if digest not in self._notarized.get(height, {}):
                continue
            share = FinalizationShare(height, digest, self.node_id,
                                      self._sign(compute_finalization_message(height, digest)))
            self._signed_finalization[height] = digest
            self._emit_own(share, out)
            self._on_share(share, self._finalization, compute_finalization_message, "finalization", own=True)
            progressed = True
        return progressed

    def _context(self, height: int, rank: int, parent_hash: bytes) -> BlockContext:
        unfinalized: list[Block] = []
        digest = parent_hash
        while digest in self._candidates and self._candidates[digest].block.height > self.finalized_height:
            unfinalized.append(self._candidates[digest].block)
            digest = self._candidates[digest].block.parent_hash
        parent = unfinalized[0] if unfinalized else (self._chain.get(self.finalized_height, (None, b""))[0])
        return BlockContext(height, rank, block_maker_for(self._subnet, height, rank), parent_hash, parent,
                            tuple(reversed(unfinalized)), ChainTip(self.finalized_height, self.finalized_hash))

    def _is_absent(self, node_id: str) -> bool:
        absent_after = self.config.absent_after_ns
        return absent_after > 0 and node_id != self.node_id and self._now >= self._last_heard[node_id] + absent_after

    def _waited_ranks(self, height: int, rank: int) -> int:
        """How many lower ranks a block of ``rank`` waits for: those whose makers are not absent.
        Only liveness depends on it (safety never does), so a wrong guess costs time, not blocks."""
        return sum(1 for lower in range(rank) if not self._is_absent(block_maker_for(self._subnet, height, lower)))

    def _notarization_due(self, height: int, rank: int) -> int:
        """``round start + waited ranks × round_timeout``."""
        return self._round_start + self._waited_ranks(height, rank) * self.config.round_timeout_ns

    def _proposal_due(self, height: int) -> int:
        """``round start + block_interval + waited ranks × round_timeout``."""
        rank = rank_of(self._subnet, height, self.node_id)
        return self._notarization_due(height, rank) + self.config.block_interval_ns

    def _propose(self, now: int, out: list[Output]) -> bool:
        height = self._round_height
        rank = rank_of(self._subnet, height, self.node_id)
        if height in self._proposed or now < self._proposal_due(height):
            return False
        if any(self._candidates[d].block.rank < rank and self._candidates[d].verdict == VALID
               for d in self._by_height.get(height, {})):
            return False   # a valid block of lower rank is on its way to notarization
        notarized = self._notarized.get(height - 1, {})
        if height - 1 == self.finalized_height:
            parent_hash = self.finalized_hash
        else:
            # the notarized parent of lowest (rank, hash): every node picks the same when it can
            parent_hash = min(notarized, key=lambda d: (self._candidates[d].block.rank, d))
        context = self._context(height, rank, parent_hash)
        block = self._propose_fn(context, now)
        if (block.height, block.parent_hash, block.maker, block.rank) != (height, parent_hash, self.node_id, rank):
            raise AgreementError(f"propose made a block for the wrong place: {block.height}/{block.rank}/{block.maker}")
        digest = block_hash(block)
        proposal = Proposal(block, self._sign(compute_proposal_message(digest)))
        self._proposed[height] = digest
        self._emit_own(proposal, out)
        self._on_proposal(proposal, own=True)
        return True

    def _sign_notarization(self, now: int, out: list[Output]) -> bool:
        """Sign the due, valid block of lowest rank at the round's height if it improves on
        what we signed there (module docstring)."""
        height = self._round_height
        if height in self._signed_finalization or height <= self.finalized_height:
            return False
        signed = self._signed_notarization.setdefault(height, {})
        best_signed = self._best_signed_rank(height)
        candidates = sorted((self._candidates[d] for d in self._by_height.get(height, {})),
                            key=lambda c: (c.block.rank, c.digest))
        for candidate in candidates:
            block = candidate.block
            if block.rank >= best_signed or now < self._notarization_due(height, block.rank):
                return False
            if candidate.verdict == INVALID or not self._parent_is_notarized(block):
                continue
            if candidate.verdict == PENDING and not self._validate(candidate, now, out):
                continue
            share = NotarizationShare(height, candidate.digest, self.node_id,
                                      self._sign(compute_notarization_message(height, candidate.digest)))
            signed[candidate.digest] = block.rank
            self._emit_own(share, out)
            self._on_share(share, self._notarization, compute_notarization_message, "notarization", own=True)
            return True
        return False

    def _validate(self, candidate: Candidate, now: int, out: list[Output]) -> bool:
        block = candidate.block
        try:
            self._validate_fn(block, self._context(block.height, block.rank, block.parent_hash), now)
        except BlockNotYetValid:
            self._count("proposal_not_yet_valid")
            return False   # asked again at the next timer
        except InvalidBlock as exc:
            candidate.verdict = INVALID
            self._count("proposal_invalid")
            out.append(Refused(block.height, candidate.digest, f"{type(exc).__name__}: {exc}"))
            return False
        candidate.verdict = VALID
        return True
