"""What every node checks before it accepts a proposed block (pure; the notary's job).

``validate_block`` raises ``InvalidBlock`` (permanent: the block is refused for good) or
``BlockNotYetValid`` (transient: ask again later), else returns the block's XNet payload
decoded into stream slices (ready for the batch). Rules, in order:

1. it extends our tip: ``height = tip.height + 1`` and ``parent_hash = tip.block_hash``;
2. its maker is the subnet's node of its rank at that height;
3. ``time >= state.metadata.batch_time`` and, when ``now`` is given, ``time <= now + max_clock_skew_ns``;
4. its registry version is known locally (else transient) and not older than the state's;
5. payload bytes (ingress ``count_bytes`` + slice lengths) ``<= limits.max_block_payload_bytes``;
6. each ingress message: unique id in the block, not in the state's ingress history,
   ``time <= expiry <= time + limits.max_ingress_ttl_ns``, ``count_bytes <= limits.max_ingress_bytes``,
   receiver routed to this subnet at the block's registry version, or the management
   canister (``MANAGEMENT_CANISTER_ID``: every subnet executes the calls sent to it);
7. ``validate_xnet_payload`` against our state at the tip and the past payloads, keys from
   the registry at the block's version (``Invalid`` → ``InvalidXNetPayloadInBlock``,
   ``Transient`` → ``BlockNotYetValid``).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from message_routing.limits import Limits
from state_manager.messages import MANAGEMENT_CANISTER_ID
from state_manager.replicated_state import ReplicatedState
from xnet.errors import RegistryVersionUnavailable
from xnet.payload_validator import Invalid, Transient, validate_xnet_payload
from xnet.xnet_payload import DecodedXNetPayload, XNetPayload

from .block import Block, BlockError, payload_byte_size
from .block_maker import ChainTip, block_maker_for
from .registry import Registry

__all__ = [
    "DEFAULT_MAX_CLOCK_SKEW_NS", "InvalidBlock", "BlockNotYetValid", "WrongHeight", "WrongParent",
    "WrongMaker", "TimeRegresses", "TimeInFuture", "RegistryVersionRegresses", "BlockPayloadTooLarge",
    "InvalidIngressInBlock", "InvalidXNetPayloadInBlock", "validate_block", "registry_key_lookup",
]

DEFAULT_MAX_CLOCK_SKEW_NS = 10 * 10**9


class InvalidBlock(BlockError):
    """A proposal that breaks a rule and never becomes valid."""


class BlockNotYetValid(BlockError):
    """A proposal this node cannot judge yet (unknown registry version, state not there)."""


class WrongHeight(InvalidBlock):
    pass


class WrongParent(InvalidBlock):
    pass


class WrongMaker(InvalidBlock):
    pass


class TimeRegresses(InvalidBlock):
    pass


class TimeInFuture(InvalidBlock):
    pass


class RegistryVersionRegresses(InvalidBlock):
    pass


class BlockPayloadTooLarge(InvalidBlock):
    pass


class InvalidIngressInBlock(InvalidBlock):
    pass


class InvalidXNetPayloadInBlock(InvalidBlock):
    """``validate_xnet_payload`` said ``Invalid``; ``remote`` and ``reason`` say which and why."""

    def __init__(self, remote: Optional[str], reason: str, error: Exception) -> None:
        super().__init__(f"XNet payload invalid ({reason}, from {remote!r}): {error}")
        self.remote = remote
        self.reason = reason
        self.error = error


def registry_key_lookup(registry: Registry) -> Callable[[str, int], Optional[bytes]]:
    """``public_key_for`` for the XNet validator: ``RegistryVersionUnavailable`` for a version
    not known locally (transient), ``None`` for a subnet without a key at a known version."""

    def public_key_for(subnet: str, version: int) -> Optional[bytes]:
        if not registry.has_version(version):
            raise RegistryVersionUnavailable(f"registry version {version} is not known yet")
        return registry.public_key_for(subnet, version)

    return public_key_for


def _check_ingress(block: Block, state: ReplicatedState, registry: Registry, limits: Limits) -> None:
    own = state.own_subnet_id
    table = registry.record(block.registry_version).routing_table
    seen: set[bytes] = set()
    for ingress in block.ingress:
        mid = ingress.message_id
        if mid in seen:
            raise InvalidIngressInBlock(f"message {mid.hex()} appears twice")
        seen.add(mid)
        if mid in state.ingress_history:
            raise InvalidIngressInBlock(f"message {mid.hex()} was already inducted")
        if ingress.expiry_time < block.time:
            raise InvalidIngressInBlock(f"message {mid.hex()} expired before the block time")
        if ingress.expiry_time > block.time + limits.max_ingress_ttl_ns:
            raise InvalidIngressInBlock(f"message {mid.hex()} expires too far in the future")
        if ingress.count_bytes() > limits.max_ingress_bytes:
            raise InvalidIngressInBlock(f"message {mid.hex()} exceeds the ingress size limit")
        if (ingress.receiver != MANAGEMENT_CANISTER_ID and table.lookup(ingress.receiver) != own
                and not registry.has_hosted(own, ingress.receiver, block.registry_version)):
            raise InvalidIngressInBlock(f"message {mid.hex()} is for canister {ingress.receiver}, never on this subnet")


def validate_block(
    block: Block,
    *,
    tip: ChainTip,
    state: ReplicatedState,
    past_payloads: Sequence[XNetPayload],
    registry: Registry,
    limits: Limits,
    now: int | None = None,
    max_clock_skew_ns: int = DEFAULT_MAX_CLOCK_SKEW_NS,
) -> DecodedXNetPayload:
    """Accept ``block`` on top of ``tip`` (whose state is ``state``) or raise (module docstring)."""
    own = state.own_subnet_id
    if block.height != tip.height + 1:
        raise WrongHeight(f"block at height {block.height} on a tip at {tip.height}")
    if block.parent_hash != tip.block_hash:
        raise WrongParent(f"block at height {block.height} builds on another parent")
    if state.metadata.batch_number != tip.height:
        raise BlockNotYetValid(f"the state is at height {state.metadata.batch_number}, not {tip.height}")
    state_version = state.metadata.network_topology.registry_version
    if not registry.has_version(block.registry_version):
        if block.registry_version > registry.latest_version:
            raise BlockNotYetValid(f"registry version {block.registry_version} is not known yet")
        raise InvalidBlock(f"registry version {block.registry_version} does not exist")
    if block.registry_version < state_version:
        raise RegistryVersionRegresses(f"registry version {block.registry_version} is older than {state_version}")
    subnet = registry.subnet(own, block.registry_version)
    if subnet is None:
        raise InvalidBlock(f"subnet {own!r} is not in registry version {block.registry_version}")
    if block.rank >= subnet.size or block.maker != block_maker_for(subnet, block.height, block.rank):
        raise WrongMaker(f"{block.maker!r} is not the maker of rank {block.rank} at height {block.height}")
    if block.time < state.metadata.batch_time:
        raise TimeRegresses(f"block time {block.time} is before the state's time {state.metadata.batch_time}")
    if now is not None and block.time > now + max_clock_skew_ns:
        raise TimeInFuture(f"block time {block.time} is ahead of the local clock {now}")
    size = payload_byte_size(block)
    if size > limits.max_block_payload_bytes:
        raise BlockPayloadTooLarge(f"{size} payload bytes exceed {limits.max_block_payload_bytes}")
    _check_ingress(block, state, registry, limits)
    result = validate_xnet_payload(
        block.xnet_payload, own, state, past_payloads, registry_key_lookup(registry), block.registry_version, limits)
    if isinstance(result, Invalid):
        raise InvalidXNetPayloadInBlock(result.remote, result.reason, result.error)
    if isinstance(result, Transient):
        raise BlockNotYetValid(f"XNet payload not decidable yet: {result.reason}")
    return result.slices
