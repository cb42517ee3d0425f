"""Who makes the block at a height, and what goes into it (pure).

Makers rotate round-robin over the subnet's nodes: at height ``h`` the node of rank ``r``
is ``node_ids[(h - 1 + r) mod n]``. Rank 0 is the designated maker; if its block is not
finalized (it is down, or its proposal was refused) rank 1 proposes, and so on.

A block on top of the chain tip (whose state is ``state``) holds:

* ``time = max(now, state.metadata.batch_time)`` — batch time never goes backwards;
* ingress from the maker's pool, in arrival order, at most ``max_ingress_messages`` and half
  the block payload budget, skipping messages the state's ingress history already knows and
  messages whose receiver ``routing_table`` (at the block's registry version) does not route
  to this subnet (the management canister, ``MANAGEMENT_CANISTER_ID``, is every subnet's)
  unless ``hosted_before(receiver)`` — a canister that moved away after its message was
  pooled: the message goes into a block and induction answers it (``CANISTER_ON_ANOTHER_SUBNET``), so
  its sender hears; any other is what the notary refuses and would stall the chain;
* the XNet payload ``get_xnet_payload(state, past_payloads, slice_pool, remaining budget,
  limits, seed)`` with ``seed = parent hash ‖ height`` (the builder's rotation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from message_routing.limits import Limits
from state_manager.messages import MANAGEMENT_CANISTER_ID, Ingress
from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import RoutingTable
from xnet.payload_builder import get_xnet_payload
from xnet.slice_pool import SlicePool
from xnet.xnet_payload import XNetPayload

from .block import Block
from .ingress_pool import IngressPool
from .registry import SubnetRecord

__all__ = ["ChainTip", "DEFAULT_MAX_INGRESS_MESSAGES", "block_maker_for", "rank_of", "build_block"]

DEFAULT_MAX_INGRESS_MESSAGES = 1_000


@dataclass(frozen=True, slots=True)
class ChainTip:
    """The last finalized block a new block builds on (height 0: genesis)."""

    height: int
    block_hash: bytes


def block_maker_for(subnet: SubnetRecord, height: int, rank: int) -> str:
    """``node_ids[(height - 1 + rank) mod n]``."""
    if type(height) is not int or height < 1 or type(rank) is not int or rank < 0:
        raise ValueError(f"height must be >= 1 and rank >= 0, got {height!r}, {rank!r}")
    return subnet.node_ids[(height - 1 + rank) % subnet.size]


def rank_of(subnet: SubnetRecord, height: int, node_id: str) -> int:
    """The rank of ``node_id`` at ``height`` (inverse of ``block_maker_for`` over ranks ``< n``)."""
    return (subnet.node_index(node_id) - 1 - (height - 1)) % subnet.size


def build_block(
    *,
    tip: ChainTip,
    now: int,
    registry_version: int,
    maker: str,
    rank: int,
    state: ReplicatedState,
    past_payloads: Sequence[XNetPayload],
    ingress_pool: IngressPool,
    slice_pool: SlicePool,
    limits: Limits,
    routing_table: RoutingTable,
    max_ingress_messages: int = DEFAULT_MAX_INGRESS_MESSAGES,
    hosted_before: Callable[[int], bool] = lambda canister_id: False,
) -> Block:
    """The block ``maker`` (of ``rank``) proposes at ``tip.height + 1`` (module docstring)."""
    height = tip.height + 1
    if state.metadata.batch_number != tip.height:
        raise ValueError(f"the state is at height {state.metadata.batch_number}, the tip at {tip.height}")
    time = max(now, state.metadata.batch_time)
    budget = limits.max_block_payload_bytes
    history = state.ingress_history
    own = state.own_subnet_id

    def excluded(ingress: Ingress) -> bool:
        if ingress.message_id in history:
            return True
        return (ingress.receiver != MANAGEMENT_CANISTER_ID and routing_table.lookup(ingress.receiver) != own
                and not hosted_before(ingress.receiver))

    ingress = ingress_pool.select(time, budget // 2, max_ingress_messages, excluded)
    remaining = budget - sum(i.count_bytes() for i in ingress)
    seed = tip.block_hash + height.to_bytes(8, "big")
    xnet_payload = get_xnet_payload(state, past_payloads, slice_pool, remaining, limits, seed)
    return Block(height, tip.block_hash, time, registry_version, ingress, xnet_payload, maker, rank)
