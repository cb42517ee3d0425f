"""The XNet payload builder: which pooled slices go into the next block (the spec's
``get_xnet_payload`` with the IC's refinements; pure).

For the block on top of ``state`` and the agreed but not yet executed ``past_payloads``:

1. ``expected = expected_indices(state, past_payloads)`` for every peer with a pooled slice;
2. peers are visited in a seeded rotation (``compute_rotation``), at most one slice each;
3. first pass — peers whose pooled slice has no message at the expected index but carries
   new signals (``signals_end > expected.signal_index``) get a header-only slice: signals
   are small and let the peer garbage-collect its stream, so they never starve; so does a
   header whose ``begin`` frees one of our reject signals (``reject_signals_begin_for``);
4. second pass — peers with messages at the expected index get a slice cut to start exactly
   there, with at most ``limits.max_slice_messages`` messages and as many as fit in
   ``min(limits.max_slice_bytes, remaining budget)`` encoded bytes (at least one when one
   fits); if not even one fits, a header-only slice if it carries new signals;
5. every slice is checked with the validator's own ``validate_slice`` (same expected
   indices, same stream end, same limits) and skipped if it would fail or not fit.

The total never exceeds ``min(byte_budget, limits.max_block_payload_bytes)``; the size of a
slice is ``len`` of its encoded bytes. The pool is only read: the caller garbage-collects it.
Pooled slices were verified when pooled; the validator re-verifies their signatures at the
block's registry version. Past payloads that do not decode raise ``CorruptPastPayload``.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Sequence

from message_routing.limits import Limits
from state_manager.messages import SubnetId
from state_manager.replicated_state import ReplicatedState
from state_manager.streams import ExpectedIndices, StreamSlice

from .errors import InvalidBuildRequest
from .expected_indices import expected_indices, reject_signals_begin_for
from .payload_validator import own_stream_end, validate_slice
from .slice_pool import PooledSlice, SlicePool, restrict_pooled_slice
from .slice_validation import InvalidSlice
from .xnet_payload import XNetPayload, decode_past_payloads

__all__ = [
    "ROTATION_DOMAIN", "compute_rotation", "has_messages_at", "carries_new_signals",
    "get_xnet_payload",
]

ROTATION_DOMAIN = b"xnet-payload-rotation"


def compute_rotation(remotes: Sequence[SubnetId], seed: bytes) -> tuple[SubnetId, ...]:
    """``r[k:] + r[:k]`` over ``r = sorted(remotes)`` with
    ``k = int(sha256(len(domain) ‖ domain ‖ seed)) mod |r|`` (``domain = "xnet-payload-rotation"``)."""
    ordered = sorted(remotes)
    if not ordered:
        return ()
    digest = hashlib.sha256(bytes([len(ROTATION_DOMAIN)]) + ROTATION_DOMAIN + seed).digest()
    start = int.from_bytes(digest, "big") % len(ordered)
    return tuple(ordered[start:] + ordered[:start])


def has_messages_at(stream_slice: StreamSlice, expected: ExpectedIndices) -> bool:
    """``messages_begin ≤ expected.message_index < messages_end``: the slice can continue the stream."""
    return bool(stream_slice.messages) and (
        stream_slice.messages_begin <= expected.message_index < stream_slice.messages_end)


def carries_new_signals(stream_slice: StreamSlice, expected: ExpectedIndices) -> bool:
    """``header.signals_end > expected.signal_index``."""
    return stream_slice.header.signals_end > expected.signal_index


def _largest_passing(count: int, candidate: Callable[[int], PooledSlice], passes: Callable[[PooledSlice], bool]):
    """The passing ``candidate(k)`` with the largest ``k`` in ``[1, count]``, or ``None``.
    Every rule checked only gets harder with more messages, so a binary search suffices."""
    if count < 1:
        return None
    whole = candidate(count)
    if passes(whole):
        return whole
    best = None
    low, high = 1, count - 1
    while low <= high:
        middle = (low + high) // 2
        cut = candidate(middle)
        if passes(cut):
            best, low = cut, middle + 1
        else:
            high = middle - 1
    return best


def _header_only(pooled: PooledSlice) -> PooledSlice:
    s = pooled.stream_slice
    return pooled if not s.messages else restrict_pooled_slice(pooled, s.messages_end, s.messages_end)


def get_xnet_payload(
    state: ReplicatedState,
    past_payloads: Sequence[XNetPayload],
    pool: SlicePool,
    byte_budget: int,
    limits: Limits,
    seed: bytes,
) -> XNetPayload:
    """``get_xnet_payload`` (module docstring): sorted ``(subnet, certified slice)`` pairs."""
    if type(byte_budget) is not int or byte_budget < 0:
        raise InvalidBuildRequest(f"byte_budget must be a non-negative integer, got {byte_budget!r}")
    if type(seed) is not bytes:
        raise InvalidBuildRequest(f"seed must be bytes, got {type(seed).__name__}")
    own = state.own_subnet_id
    remotes = [remote for remote in pool.remotes() if remote != own]
    decoded_past = decode_past_payloads(past_payloads)
    expected = expected_indices(state, remotes, decoded_past)
    reject_floor = {remote: reject_signals_begin_for(state, remote, decoded_past) for remote in remotes}
    order = compute_rotation(remotes, seed)
    remaining = min(byte_budget, limits.max_block_payload_bytes)
    chosen: dict[SubnetId, bytes] = {}

    def passes(remote: SubnetId, cut: PooledSlice) -> bool:
        if cut.byte_size > remaining:
            return False
        try:
            validate_slice(cut.stream_slice, cut.byte_size, expected[remote], own_stream_end(state, remote), limits,
                           own_reject_signals_begin=reject_floor[remote])
        except InvalidSlice:
            return False
        return True

    def header_only_if_new_signals(remote: SubnetId, pooled: PooledSlice) -> PooledSlice | None:
        floor = reject_floor[remote]
        if not (carries_new_signals(pooled.stream_slice, expected[remote])
                or (floor is not None and pooled.stream_slice.header.begin > floor)):
            return None
        cut = _header_only(pooled)
        return cut if passes(remote, cut) else None

    # 1. header-only slices with new signals, from peers without messages to offer
    for remote in order:
        pooled = pool.get(remote)
        if has_messages_at(pooled.stream_slice, expected[remote]):
            continue
        cut = header_only_if_new_signals(remote, pooled)
        if cut is not None:
            chosen[remote] = cut.data
            remaining -= cut.byte_size

    # 2. slices with messages, cut to start at the expected index and to the limits
    for remote in order:
        pooled = pool.get(remote)
        s = pooled.stream_slice
        begin = expected[remote].message_index
        if not has_messages_at(s, expected[remote]):
            continue
        count = min(limits.max_slice_messages, s.messages_end - begin)
        cut = _largest_passing(
            count,
            lambda k: restrict_pooled_slice(pooled, begin, begin + k),
            lambda candidate: passes(remote, candidate),
        )
        if cut is None:
            cut = header_only_if_new_signals(remote, pooled)
        if cut is not None:
            chosen[remote] = cut.data
            remaining -= cut.byte_size

    return tuple(sorted(chosen.items()))
