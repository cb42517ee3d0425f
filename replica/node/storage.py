"""What a node keeps of its own: in files (a node process) or in memory (a node in a process
with its peers). A ``Node`` (``replica.node.node``) is the same over either.

Both keep the finalized chain the node executed (``blocks``, a ``BlockStore``) and the
agreement artifacts it signed above its executed height (``own_artifacts``: a restarted node
gets them back, so it never signs two blocks at one height). ``FileStorage`` keeps, in the
node's directory (``replica.node.process_config.NodeFiles``), besides

* the block log (``blocks.log``), its signed artifacts (``agreement.log``), the finalization
  proof of its latest height (``proof.bin``) and what it executed (``executed.log``: batch
  bytes and hashes per height, checked again when a restart re-executes a height);
* checkpoints every ``checkpoint_interval`` heights with their certifications
  (``replica.node.checkpoints``), which it offers to peers that sync state
  (``replica.node.state_sync.CheckpointServer``); after each it prunes the block log to what
  peers may ask for and a restart replays, and compacts the agreement log.

``MemoryStorage`` keeps the chain and the artifacts only: no checkpoints, proofs or executed
log (its driver records what the subnet executed), and nothing to offer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from consensus_stub.agreement.messages import Message, artifact_height
from consensus_stub.block import Block
from consensus_stub.block_store import (
    BlockStore, BlockStoreError, ChainBase, open_block_store, replace_block_log,
)
from message_routing.batch import Batch, encode_batch
from replica.errors import ReplicaError
from state_manager.certification import Certification
from state_manager.replicated_state import ReplicatedState
from state_manager.state_tree import StateTrees
from state_manager.store import Checkpoint

from .checkpoints import NodeCheckpoints
from .node_store import AgreementLog, ExecutedLog, ProofFile, move_aside
from .process_config import NodeFiles
from .state_sync import CheckpointServer

__all__ = ["NodeRefused", "Proof", "MemoryStorage", "FileStorage"]

#: ``(height, block hash, finalization signatures)`` of the latest finalized height.
Proof = tuple[int, bytes, tuple[tuple[str, bytes], ...]]


class NodeRefused(ReplicaError, RuntimeError):
    """The node cannot start without risking finalized data (a node process exits with
    ``EXIT_REFUSED`` and is not restarted)."""


class MemoryStorage:
    """A node's chain and signed artifacts in memory (module docstring)."""

    def __init__(self) -> None:
        self.blocks = BlockStore()
        self._artifacts: list[Message] = []

    def load_checkpoint(self) -> Optional[Checkpoint]:
        return None

    def own_artifacts(self) -> list[Message]:
        return list(self._artifacts)

    def persist(self, message: Message) -> None:
        self._artifacts.append(message)

    def proof(self) -> Optional[Proof]:
        return None

    def write_proof(self, height: int, digest: bytes, proof: tuple[tuple[str, bytes], ...]) -> None:
        pass

    def executed(self, block: Block, batch: Batch, trees: StateTrees) -> None:
        """Height ``block.height`` is executed: the artifacts up to it can never matter again."""
        if self._artifacts:
            self._artifacts = [m for m in self._artifacts if artifact_height(m) > block.height]

    def checkpoint_if_due(self, height: int, state: ReplicatedState, full_hash: bytes) -> bool:
        return False

    def after_checkpoint(self, height: int, finalized_height: int) -> None:
        pass

    def keep_certification(self, certification: Certification, block_hash: Optional[bytes]) -> None:
        pass

    def offer(self) -> Optional[bytes]:
        return None

    def install(self, height: int, block_hash: bytes, state: ReplicatedState, full_hash: bytes,
                certification: Certification) -> None:
        """Continue from a synced state of ``height``: a chain starting at its block."""
        self.blocks = BlockStore(base=ChainBase(height, block_hash))

    def repair(self, height: int, block_hash: bytes, state: ReplicatedState, full_hash: bytes,
               certification: Certification, diverged_at: int) -> None:
        """A diverged node takes a certified state of ``height`` and keeps its chain: nothing
        is kept of states here."""

    def set_aside_from(self, height: int) -> None:
        pass

    def close(self) -> None:
        self.blocks.close()


class FileStorage:
    """A node process's files (module docstring). Opening refuses (``NodeRefused``) a block
    log that cannot be used; a corrupt record file raises ``NodeStoreError``."""

    def __init__(self, files: NodeFiles, *, checkpoint_interval: int, checkpoints_kept: int, retained_heights: int,
                 before_checkpoint_rename: Optional[Callable[[Path], None]] = None) -> None:
        self.files = files
        files.root.mkdir(parents=True, exist_ok=True)
        self.retained_heights = retained_heights
        self.checkpoints = NodeCheckpoints(files.checkpoints, files.certifications, interval=checkpoint_interval,
                                           keep=checkpoints_kept)
        self._server = CheckpointServer(self.checkpoints)
        self._before_rename = before_checkpoint_rename
        try:
            self.blocks: BlockStore = open_block_store(files.blocks)
        except BlockStoreError as exc:
            raise NodeRefused(str(exc)) from exc
        self.executed_log = ExecutedLog(files.executed_log)
        self.agreement_log = AgreementLog(files.agreement_log)
        self._proof = ProofFile(files.proof)

    def load_checkpoint(self) -> Optional[Checkpoint]:
        """The newest checkpoint that verifies (corrupt ones are moved aside), if the block log
        can continue from it; else ``NodeRefused``."""
        checkpoint = self.checkpoints.load_newest()
        base = checkpoint.height if checkpoint is not None else 0
        if base < self.blocks.base_height:
            raise NodeRefused(
                f"the block log {self.files.blocks} starts above height {self.blocks.base_height} but the newest "
                f"usable checkpoint is of height {base}: the state in between cannot be rebuilt here; move the block "
                f"log aside to start empty and sync state from a peer")
        if base > self.blocks.height:
            raise NodeRefused(f"checkpoint {base} is above the block log's height {self.blocks.height}")
        return checkpoint

    def own_artifacts(self) -> list[Message]:
        return list(self.agreement_log.artifacts)

    def persist(self, message: Message) -> None:
        self.agreement_log.append(message)

    def proof(self) -> Optional[Proof]:
        return self._proof.read()

    def write_proof(self, height: int, digest: bytes, proof: tuple[tuple[str, bytes], ...]) -> None:
        self._proof.write(height, digest, proof)

    def executed(self, block: Block, batch: Batch, trees: StateTrees) -> None:
        """Record (or, re-executed, check) the batch and hashes of ``block.height``."""
        self.executed_log.record(block.height, encode_batch(batch), trees.full_hash, trees.certified_root)

    def checkpoint_if_due(self, height: int, state: ReplicatedState, full_hash: bytes) -> bool:
        return self.checkpoints.write_if_due(height, state, full_hash, self._before_rename)

    def after_checkpoint(self, height: int, finalized_height: int) -> None:
        """Prune the block log to what peers may ask for (``retained_heights``) and what a
        restart from the oldest kept checkpoint replays; compact the agreement log."""
        keep_from = min(self.checkpoints.heights()[0], height - self.retained_heights) + 1
        if keep_from > self.blocks.base_height + 1:
            self.blocks.prune_below(keep_from)
        self.agreement_log.compact(finalized_height)

    def keep_certification(self, certification: Certification, block_hash: Optional[bytes]) -> None:
        self.checkpoints.keep_certification(certification, block_hash)

    def offer(self) -> Optional[bytes]:
        return self._server.offer()

    def install(self, height: int, block_hash: bytes, state: ReplicatedState, full_hash: bytes,
                certification: Certification) -> None:
        """Continue from a synced state of ``height``: a block log starting at its block, a
        fresh executed log (the old files are moved aside, never deleted), a checkpoint of it
        with its certification."""
        self.blocks.close()
        self.blocks = replace_block_log(self.files.blocks, ChainBase(height, block_hash))
        self.executed_log.close()
        move_aside(self.files.executed_log)
        self.executed_log = ExecutedLog(self.files.executed_log)
        self.checkpoints.write(height, state, full_hash)
        self.checkpoints.keep_certification(certification, block_hash)

    def repair(self, height: int, block_hash: bytes, state: ReplicatedState, full_hash: bytes,
               certification: Certification, diverged_at: int) -> None:
        """A diverged node takes the certified state of ``height`` and keeps its block log (it
        re-executes the blocks above): its checkpoints from ``diverged_at`` up and its executed
        log (diverged hashes) are moved aside, never deleted; the certified state becomes a
        checkpoint with its certification."""
        self.set_aside_from(diverged_at)
        self.executed_log.close()
        move_aside(self.files.executed_log)
        self.executed_log = ExecutedLog(self.files.executed_log)
        self.checkpoints.write(height, state, full_hash)
        self.checkpoints.keep_certification(certification, block_hash)

    def set_aside_from(self, height: int) -> None:
        """Checkpoints of ``height`` and above (a diverged state's) moved aside, never deleted."""
        self.checkpoints.set_aside_from(height)

    def close(self) -> None:
        for closable in (self.blocks, self.executed_log, self.agreement_log):
            closable.close()
