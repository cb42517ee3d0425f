"""Demultiplexing a batch's payload: XNet slices to the stream handler, ingress to the VSR."""

from __future__ import annotations

from state_manager.messages import Ingress, SubnetId
from state_manager.replicated_state import ReplicatedState
from state_manager.streams import StreamSlice

from .limits import Limits
from .stream_handler import induct_loopback_stream, process_stream_slice
from .valid_set_rule import IngressInductionFailure, induct_ingress

__all__ = ["demux"]


def demux(
    state: ReplicatedState,
    xnet_payload: tuple[tuple[SubnetId, StreamSlice], ...],
    ingress: tuple[Ingress, ...],
    limits: Limits,
) -> list[IngressInductionFailure | None]:
    """Induct the loopback stream, then each peer slice in subnet order, then ingress in
    block order. Returns the VSR outcome of each ingress message (None = inducted)."""
    induct_loopback_stream(state, limits)
    own = state.own_subnet_id
    for remote, stream_slice in sorted(xnet_payload, key=lambda pair: pair[0]):
        if remote == own:
            state.metadata.count("critical_errors")  # our own stream is never in a payload
            continue
        process_stream_slice(state, remote, stream_slice, limits)
    return [induct_ingress(state, message, limits) for message in ingress]
