"""What happened to messages on one subnet, height by height, from its recorded blocks.

``collect_events`` replays a subnet's finalized blocks from its genesis state through the
node's own batch processor (``process_block``: the same ``execute_round`` and commit the
nodes ran, so the states are the certified ones: each height's certified root is checked
against the block log's successor states only through determinism) and, after each height,
notes what changed for the messages ``replica trace`` follows:

* ``BlockInfo``: the block (maker, time), the ingress it carried, and per peer subnet the
  range of stream indices its XNet slice carried;
* ``Routed``: a message appended to one of our streams (to a peer, or loopback) at an index;
* ``ContextOpened`` / ``CallbackOpened`` / ``CallbackClosed``: call contexts (with their
  origin: an ingress message or a canister's callback) and callbacks (one per outgoing call);
* ``SignalSent``: a reject signal we sent for a peer's message (its index and reason);
* ``StreamBegin``: our stream's ``begin`` moved (the peer acknowledged messages below it);
* ``IngressChange``: a watched ingress message changed status;
* ``Executed``: a message executed (seen by the execution's observer during the replay):
  which one (``ingress``, ``request`` or ``response`` and its ids), its kind and the
  instructions it used, and whether it trapped on its instruction limit.

``Timeline.queued`` is what the last state still holds in canister queues (held-back
output, inducted but not yet executed input, ingress not yet executed).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from consensus_stub.block import Block, block_hash
from consensus_stub.registry import Registry
from message_routing.executor import Executor
from message_routing.limits import Limits
from replica.execution import ExecutionEnvironment
from replica.node.batch_processor import process_block
from state_manager.canister_state import CallOrigin
from state_manager.messages import Request, RequestOrResponse, Response
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import decode_state
from state_manager.state_manager import StateManager
from xnet.xnet_payload import decode_xnet_payload

__all__ = [
    "BlockInfo", "Routed", "ContextOpened", "CallbackOpened", "CallbackClosed", "SignalSent", "StreamBegin",
    "IngressChange", "Executed", "Queued", "Timeline", "collect_events",
]


@dataclass(frozen=True)
class BlockInfo:
    height: int
    time_ns: int
    maker: str
    ingress: tuple[tuple[bytes, int, str], ...]              # (message id, receiver, method)
    slices: dict[str, tuple[int, int]]                        # peer → stream indices [begin, end) carried


@dataclass(frozen=True)
class Routed:
    height: int
    destination: str
    index: int
    message: RequestOrResponse


@dataclass(frozen=True)
class ContextOpened:
    height: int
    canister: int
    context_id: int
    origin: CallOrigin
    method: str


@dataclass(frozen=True)
class CallbackOpened:
    height: int
    canister: int
    callback_id: int
    context_id: int
    respondent: int


@dataclass(frozen=True)
class CallbackClosed:
    height: int
    canister: int
    callback_id: int


@dataclass(frozen=True)
class SignalSent:
    height: int
    remote: str
    index: int
    reason: str


@dataclass(frozen=True)
class StreamBegin:
    height: int
    destination: str
    begin: int


@dataclass(frozen=True)
class IngressChange:
    height: int
    message_id: bytes
    status: str
    reject_code: int | None = None
    reject_message: str | None = None


@dataclass(frozen=True)
class Executed:
    height: int
    canister: int
    message: tuple            # ("ingress", id) | ("request", sender, callback) | ("response", callback)
    kind: str                 # "update" | "query" | "callback"
    instructions: int
    limit_exceeded: bool


def _message_key(message: object) -> tuple:
    if type(message) is Request:
        return ("request", message.sender, message.sender_reply_callback)
    if type(message) is Response:
        return ("response", message.originator_reply_callback)
    return ("ingress", getattr(message, "message_id", b""))


@dataclass(frozen=True)
class Queued:
    kind: str          # "output" | "input" | "ingress"
    canister: int
    remote: int | None
    message: object


@dataclass
class Timeline:
    subnet: str
    blocks: list[BlockInfo] = field(default_factory=list)
    routed: list[Routed] = field(default_factory=list)
    contexts: list[ContextOpened] = field(default_factory=list)
    callbacks_opened: list[CallbackOpened] = field(default_factory=list)
    callbacks_closed: list[CallbackClosed] = field(default_factory=list)
    signals: list[SignalSent] = field(default_factory=list)
    stream_begins: list[StreamBegin] = field(default_factory=list)
    ingress: list[IngressChange] = field(default_factory=list)
    executed: list[Executed] = field(default_factory=list)
    queued: list[Queued] = field(default_factory=list)
    stream_limits: tuple[int, int] = (0, 0)     # (max messages, max bytes) of a stream

    @property
    def height(self) -> int:
        return self.blocks[-1].height if self.blocks else 0

    @property
    def last_block_time_ns(self) -> int | None:
        return self.blocks[-1].time_ns if self.blocks else None

    def execution(self, canister: int, message: tuple) -> Executed | None:
        """The execution of ``message`` (an ``Executed.message`` key) by ``canister``."""
        return next((e for e in self.executed if e.canister == canister and e.message == message), None)

    def stream_begin(self, destination: str) -> int:
        begin = 0
        for event in self.stream_begins:
            if event.destination == destination:
                begin = event.begin
        return begin


class _Observer:
    """Diffs consecutive states of one subnet into ``Timeline`` events."""

    def __init__(self, timeline: Timeline, watch: frozenset[bytes]) -> None:
        self.t = timeline
        self.watch = watch
        self._ends: dict[str, int] = {}
        self._begins: dict[str, int] = {}
        self._signals_end: dict[str, int] = {}
        self._next_context: dict[int, int] = {}
        self._next_callback: dict[int, int] = {}
        self._open_callbacks: dict[int, set[int]] = {}
        self._statuses: dict[bytes, str] = {}

    def observe(self, state: ReplicatedState, height: int) -> None:
        t = self.t
        own = state.metadata.own_subnet_id
        for destination, stream in state.streams.items():
            end = self._ends.get(destination, stream.begin)
            if destination == own and stream.begin > end:
                end = stream.begin       # a loopback stream restarts its indices after it emptied
            for index in range(max(end, stream.begin), stream.end):
                t.routed.append(Routed(height, destination, index, stream.message_at(index)))
            self._ends[destination] = stream.end
            if self._begins.get(destination) != stream.begin:
                self._begins[destination] = stream.begin
                t.stream_begins.append(StreamBegin(height, destination, stream.begin))
            before = self._signals_end.get(destination, 0)
            for signal in stream.reject_signals:
                if signal.index >= before:
                    t.signals.append(SignalSent(height, destination, signal.index, signal.reason.name))
            self._signals_end[destination] = stream.signals_end
        if own in self._ends and own not in state.streams:
            del self._ends[own]          # the loopback stream emptied and was removed
        for canister_id, canister in state.canisters.items():
            first = self._next_context.get(canister_id, 0)
            for context_id in range(first, canister.next_call_context_id):
                context = canister.call_contexts.get(context_id)
                if context is not None:
                    t.contexts.append(ContextOpened(height, canister_id, context_id, context.origin,
                                                    context.method_name))
            self._next_context[canister_id] = canister.next_call_context_id
            first = self._next_callback.get(canister_id, 0)
            open_now = set(canister.callbacks.keys())
            for callback_id in range(first, canister.next_callback_id):
                callback = canister.callbacks.get(callback_id)
                if callback is not None:
                    t.callbacks_opened.append(CallbackOpened(height, canister_id, callback_id,
                                                             callback.call_context_id, callback.respondent))
            for callback_id in sorted(self._open_callbacks.get(canister_id, set()) - open_now):
                t.callbacks_closed.append(CallbackClosed(height, canister_id, callback_id))
            self._open_callbacks[canister_id] = open_now
            self._next_callback[canister_id] = canister.next_callback_id
        for message_id in self.watch:
            status = state.ingress_history.get(message_id)
            if status is None:
                continue
            name = status.state.name.lower()
            if self._statuses.get(message_id) != name:
                self._statuses[message_id] = name
                t.ingress.append(IngressChange(height, message_id, name,
                                               int(status.reject_code) if status.reject_code is not None else None,
                                               status.reject_message))

    def finish(self, state: ReplicatedState) -> None:
        for canister_id, canister in state.canisters.items():
            queues = canister.queues
            for remote, queue in queues.output_queues.items():
                for message in queue.elements:
                    self.t.queued.append(Queued("output", canister_id, remote, message))
            for remote, queue in queues.input_queues.items():
                for message in queue.elements:
                    self.t.queued.append(Queued("input", canister_id, remote, message))
            for ingress in queues.ingress_queue.elements:
                self.t.queued.append(Queued("ingress", canister_id, None, ingress))


def collect_events(
    subnet: str,
    genesis_state: bytes,
    blocks: Sequence[Block],
    registry: Registry,
    executor: Executor,
    limits: Limits,
    *,
    watch: Iterable[bytes] = (),
    on_height: Callable[[int], None] | None = None,
) -> Timeline:
    """Replay ``blocks`` on ``genesis_state`` and return the ``Timeline`` of ``subnet``
    (module docstring); ``watch``: ingress message ids whose status changes to note."""
    timeline = Timeline(subnet, stream_limits=(limits.max_stream_messages, limits.max_stream_bytes))
    manager = StateManager(decode_state(genesis_state), keep_heights=2)
    observer = _Observer(timeline, frozenset(watch))
    observer.observe(manager.take_tip(), 0)
    state = manager.take_tip()
    for block in blocks:
        decoded = decode_xnet_payload(block.xnet_payload)
        slices = {}
        for peer, stream_slice in decoded:
            slices[peer] = (stream_slice.messages_begin, stream_slice.messages_end)
        timeline.blocks.append(BlockInfo(
            block.height, block.time, block.maker,
            tuple((i.message_id, i.receiver, i.method_name) for i in block.ingress), slices))
        topology = registry.topology(block.registry_version)

        def executed(canister: int, message: object, usage, height: int = block.height) -> None:
            timeline.executed.append(Executed(height, canister, _message_key(message), usage.kind,
                                              usage.instructions, usage.limit_exceeded))

        with _observed(executor, executed):
            _, state, _ = process_block(manager, block, block_hash(block), decoded, topology, executor, limits)
        observer.observe(state, block.height)
        if on_height is not None:
            on_height(block.height)
    observer.finish(state)
    return timeline


def _observed(executor: Executor, observer):
    """The execution's observer for the replay, if the executor has one."""
    if isinstance(executor, ExecutionEnvironment):
        return executor.observed_by(observer)
    return nullcontext()


def is_request(message: object) -> bool:
    return type(message) is Request
