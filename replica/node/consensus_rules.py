"""The block rules a node applies on top of what it has executed (pure: no clock, no I/O).

A node executes finalized blocks only, so its state is at its *executed tip*. The agreement
protocol asks it to propose or judge a block at any height it is working on, and that block's
parent may be finalized or notarized but not executed here yet. One rule covers the gap:

* **on the executed tip** a block is made from the node's pools (``make_block``) and judged
  completely against its state (``notary.validate_block``);
* **on a parent not executed here** only its *empty successor* can be made or judged: no
  ingress, no XNet payload (nothing to check them against), the parent's registry version,
  a time not before the parent's and not ahead of the node's clock (``empty_successor``,
  ``check_empty_successor``);
* **at a height already executed here** only the block executed there is valid
  (``check_executed``).

Both drivers of a node run these rules (``replica.node.node``), so a subnet in one process and
a subnet of node processes accept exactly the same blocks.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional

from consensus_stub.agreement.interface import BlockContext, Finalized
from consensus_stub.block import Block, block_hash
from consensus_stub.notary import DEFAULT_MAX_CLOCK_SKEW_NS, BlockNotYetValid, InvalidBlock, TimeInFuture
from replica.errors import ReplicaError
from state_manager.replicated_state import ReplicatedState

__all__ = [
    "FinalizedElsewhere", "EmptyBlockMismatch", "parent_of", "empty_successor", "check_empty_successor",
    "check_executed",
]


class FinalizedElsewhere(InvalidBlock, ReplicaError):
    """A proposal at a height this node has already finalized (and executed) another block at
    (an ``InvalidBlock``: the agreement protocol refuses the block)."""


class EmptyBlockMismatch(InvalidBlock, ReplicaError):
    """A block on a parent not yet executed that is not its parent's empty successor (an
    ``InvalidBlock``: the agreement protocol refuses the block)."""


def parent_of(context: BlockContext, decided: Mapping[int, Finalized]) -> Optional[Block]:
    """The parent block of a block in ``context``: the protocol's (notarized, or its finalized
    tip), else a block decided final but not executed here yet with that hash, else ``None``
    (the parent is the executed tip, or unknown here)."""
    if context.parent is not None:
        return context.parent
    entry = decided.get(context.height - 1)
    if entry is not None and entry.block_hash == context.parent_hash:
        return entry.block
    return None


def empty_successor(context: BlockContext, parent: Optional[Block], state: ReplicatedState, time: int,
                    maker: str) -> Block:
    """The block to propose on a parent this node has not executed: no ingress, no XNet
    payload, the parent's registry version (the executed state's when the parent is not
    known here), stamped ``time`` but never before the parent."""
    if parent is None:
        parent_time = state.metadata.batch_time
        version = state.metadata.network_topology.registry_version
    else:
        parent_time, version = parent.time, parent.registry_version
    return Block(context.height, context.parent_hash, max(time, parent_time), version, (), (), maker, context.rank)


def check_empty_successor(block: Block, parent: Optional[Block], clock: int,
                          max_clock_skew_ns: int = DEFAULT_MAX_CLOCK_SKEW_NS) -> None:
    """Judge a block on a parent not executed here: ``BlockNotYetValid`` while the parent is
    unknown or the block carries a payload (judged once the parent is executed);
    ``EmptyBlockMismatch`` unless it keeps its parent's registry version and does not go back
    in time; ``TimeInFuture`` when it is ahead of ``clock`` by more than the skew."""
    if parent is None:
        raise BlockNotYetValid(f"the parent of height {block.height} is not known here yet")
    if block.ingress or block.xnet_payload:
        raise BlockNotYetValid(f"height {block.height - 1} is not executed here yet: only an empty block "
                               f"can be judged on it")
    if block.time < parent.time or block.registry_version != parent.registry_version:
        raise EmptyBlockMismatch("an empty block keeps its parent's registry version and does not go back in time")
    if block.time > clock + max_clock_skew_ns:
        raise TimeInFuture(f"block time {block.time} is ahead of the local clock {clock}")


def check_executed(block: Block, hash_at: Callable[[int], Optional[bytes]]) -> None:
    """Judge a block at a height executed here: valid only if it is the block executed there
    (``FinalizedElsewhere`` otherwise)."""
    if hash_at(block.height) != block_hash(block):
        raise FinalizedElsewhere(f"height {block.height} is final with another block")
