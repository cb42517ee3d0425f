"""The deterministic state machine: one batch in, the next state out.

``execute_round = post_process ∘ execute ∘ pre_process``. Each phase takes ownership of the
state it is given (mutates and returns it) and depends on nothing but its arguments.
"""

from __future__ import annotations

from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import NetworkTopology

from .batch import Batch
from .errors import MessageRoutingError
from .demux import demux
from .executor import Executor
from .limits import Limits
from .shedding import enforce_bounded_wait_message_limit
from .stream_builder import build_streams
from .timeouts import time_out_callbacks, time_out_messages

__all__ = ["pre_process", "execute", "post_process", "execute_round", "StateMachineError"]


class StateMachineError(MessageRoutingError):
    """A batch that cannot follow the given state (wrong height, time going backwards)."""


def pre_process(state: ReplicatedState, batch: Batch, topology: NetworkTopology, limits: Limits) -> ReplicatedState:
    """Induction: adopt the batch's time and registry view, prune the ingress history, time
    out expired bounded-wait messages and callbacks (``timeouts``), induct the loopback
    stream, the XNet slices (GC + signals + messages) and ingress, then shed bounded-wait
    messages beyond their budget (``shedding``)."""
    metadata = state.metadata
    if batch.batch_number != metadata.batch_number + 1:
        raise StateMachineError(f"batch {batch.batch_number} does not follow height {metadata.batch_number}")
    if batch.time < metadata.batch_time:
        raise StateMachineError(f"batch time {batch.time} is before the state's time {metadata.batch_time}")
    if topology.registry_version != batch.registry_version:
        raise StateMachineError(
            f"topology of registry version {topology.registry_version} given for batch at {batch.registry_version}")
    metadata.batch_number = batch.batch_number
    metadata.batch_time = batch.time
    metadata.network_topology = topology
    state.ingress_history.prune(batch.time, limits.ingress_history_retention_ns)
    # Messages before callbacks: a timed-out request's local reject is its callback's answer.
    # Both before induction: a response arriving after its callback expired is then late.
    time_out_messages(state)
    time_out_callbacks(state)
    demux(state, batch.xnet_payload, batch.ingress, limits)
    enforce_bounded_wait_message_limit(state, limits)
    return state


def execute(state: ReplicatedState, execution_environment: Executor, batch: Batch, limits: Limits) -> ReplicatedState:
    """Execution: the injected environment runs canisters on the inducted messages."""
    return execution_environment.execute_round(state, batch.randomness, limits)


def post_process(state: ReplicatedState, limits: Limits) -> ReplicatedState:
    """XNet routing: shed bounded-wait messages beyond their budget (execution may have added
    some), then output queues into streams (the stream builder)."""
    enforce_bounded_wait_message_limit(state, limits)
    state = build_streams(state, limits)
    _drop_idle_streams(state)
    return state


def _drop_idle_streams(state: ReplicatedState) -> None:
    """Forget the loopback stream once it is empty: its indices mean nothing outside this
    subnet. Peer streams stay even when empty, since the peer numbers on from their indices."""
    own = state.own_subnet_id
    stream = state.streams.get(own)
    if stream is not None and stream.is_idle():
        del state.streams[own]


def execute_round(
    state: ReplicatedState,
    batch: Batch,
    topology: NetworkTopology,
    execution_environment: Executor,
    limits: Limits,
) -> ReplicatedState:
    """``post_process(execute(pre_process(state, batch)))``."""
    state = pre_process(state, batch, topology, limits)
    state = execute(state, execution_environment, batch, limits)
    return post_process(state, limits)
