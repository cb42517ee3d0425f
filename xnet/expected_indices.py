"""Expected XNet indices: where the next slice from each peer subnet must begin.

The spec's ``expected_indexes`` over ``state_and_payload_indexes``: a block maker builds on
top of blocks whose payloads are agreed but not yet executed, so the indices advance past
those payloads too.
"""

from __future__ import annotations

from typing import Iterable

from state_manager.messages import SubnetId
from state_manager.replicated_state import ReplicatedState
from state_manager.streams import ExpectedIndices

from .xnet_payload import SlicesBySubnet, XNetPayload, decode_past_payloads

__all__ = ["expected_indices", "expected_indices_for", "expected_indices_from_payloads", "reject_signals_begin_for"]


def expected_indices_for(
    state: ReplicatedState, remote: SubnetId, past_payloads: Iterable[SlicesBySubnet]
) -> ExpectedIndices:
    """For peer ``remote``:

    ``message_index`` = ``messages_end`` of the last past-payload slice from ``remote`` that
    carried messages, else ``streams[remote].signals_end``;
    ``signal_index`` = ``header.signals_end`` of the last past-payload slice from ``remote``,
    else ``streams[remote].begin``.
    """
    stream = state.streams.get(remote)
    message_index = stream.signals_end if stream is not None else 0
    signal_index = stream.begin if stream is not None else 0
    for payload in past_payloads:
        stream_slice = payload.get(remote)
        if stream_slice is None:
            continue
        if stream_slice.messages:
            message_index = stream_slice.messages_end
        signal_index = stream_slice.header.signals_end
    return ExpectedIndices(message_index, signal_index)


def reject_signals_begin_for(
    state: ReplicatedState, remote: SubnetId, past_payloads: Iterable[SlicesBySubnet]
) -> int | None:
    """The index of our oldest reject signal for ``remote``'s stream that is still to be
    garbage-collected: the first of ``streams[remote].reject_signals`` at or above the largest
    ``header.begin`` of the past-payload slices from ``remote`` (None if there is none).

    A slice from ``remote`` whose ``header.begin`` exceeds it frees that signal, so it is
    worth inducting even with no messages and no new signals (otherwise the reject signals
    for ``remote``'s last messages would stay in our stream for good once traffic stops).
    """
    stream = state.streams.get(remote)
    if stream is None or not stream.reject_signals:
        return None
    freed_below = 0
    for payload in past_payloads:
        stream_slice = payload.get(remote)
        if stream_slice is not None:
            freed_below = max(freed_below, stream_slice.header.begin)
    for signal in stream.reject_signals:
        if signal.index >= freed_below:
            return signal.index
    return None


def expected_indices(
    state: ReplicatedState, remotes: Iterable[SubnetId], past_payloads: Iterable[SlicesBySubnet] = ()
) -> dict[SubnetId, ExpectedIndices]:
    """``expected_indices_for`` every peer in ``remotes`` (in subnet order)."""
    payloads = list(past_payloads)
    own = state.own_subnet_id
    return {r: expected_indices_for(state, r, payloads) for r in sorted(set(remotes)) if r != own}


def expected_indices_from_payloads(
    state: ReplicatedState, remotes: Iterable[SubnetId], past_payloads: Iterable[XNetPayload]
) -> dict[SubnetId, ExpectedIndices]:
    """``expected_indices(state, remotes, decoded past payloads)`` for past payloads as agreed
    in blocks (certified slice bytes), each slice decoded with
    ``decode_valid_certified_stream_slice``; ``CorruptPastPayload`` if one does not decode."""
    return expected_indices(state, remotes, decode_past_payloads(past_payloads))
