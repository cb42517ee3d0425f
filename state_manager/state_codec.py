"""The whole replicated state as one canonical value: checkpoints and replay start points.

``decode_state(encode_state(s)) == s`` and the decoded state hashes to the same full-state
hash. Decoding is strict (``CodecError``), since checkpoints come from disk.

Versions (the first item of the value). A state is written at the lowest version that can
express it, so each state has one encoding and states without bounded-wait calls or canister
logs keep their version-2 bytes:

* 4 — some canister has a log (``CanisterState.log`` has logged a record): every canister
  ends with its log ``[next_index, [[index, timestamp_nanos, content], ...]]`` (``[0, []]``
  for one that never logged), after the fields of version 2; deadlines may or may not be
  present. Written only then, so a version-4 state without any log is refused.
* 3 — some message, callback or call origin carries a deadline (bounded-wait calls); the
  fields are those of version 2, values with a deadline end with it. Written only then, so a
  version-3 state without any deadline is refused as non-canonical.
* 2 — a canister ends with its ``module_source`` (text, "" for builtin modules, and then
  ``module_hash == SHA-256(module_source)`` is checked); the state ends with its
  ``management_queue``.
* 1 — neither (no source canisters, an empty management queue); still decoded, so testnet
  directories and recorded runs written before version 2 keep loading.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .canister_log import CanisterLog, LogRecord
from .canister_state import CanisterState, CanisterStatus
from .codec import (
    CodecError, call_context_from_value, call_context_to_value, callback_from_value, callback_to_value,
    check_bytes, check_str, check_tuple, check_u64, decode_typed, header_from_value, header_to_value, ingress_from_value,
    ingress_status_from_value, ingress_status_to_value, ingress_to_value, message_from_value, message_to_value,
)
from .encoding import encode_unchecked
from .queues import Queue
from .replicated_state import ReplicatedState
from .routing_table import CanisterIdRange, CanisterMigrations, NetworkTopology, RoutingTable, RoutingTableError
from .stable_map import StableValueError
from .streams import Stream

__all__ = ["STATE_ENCODING_VERSION", "BOUNDED_WAIT_STATE_ENCODING_VERSION", "LOG_STATE_ENCODING_VERSION",
           "state_uses_deadlines", "canister_uses_deadlines", "state_uses_logs", "canister_encoding_version",
           "encode_state", "decode_state", "state_to_value", "state_from_value", "state_encoding_version",
           "topology_to_value", "topology_from_value", "canister_log_to_value", "canister_log_from_value"]

STATE_ENCODING_VERSION = 2
#: The version of states that hold anything with a deadline (see the module docstring).
BOUNDED_WAIT_STATE_ENCODING_VERSION = 3
#: The version of states in which some canister has a log (see the module docstring).
LOG_STATE_ENCODING_VERSION = 4
#: Versions ``decode_state`` reads: the items of a state and of a canister in each.
_STATE_ARITY = {1: 10, 2: 11, 3: 11, 4: 11}
_CANISTER_ARITY = {1: 15, 2: 16, 3: 16, 4: 17}


def canister_uses_deadlines(canister: CanisterState) -> bool:
    """Some queued message, callback or call origin of ``canister`` has a deadline."""
    for callback in canister.callbacks.values():
        if callback.deadline:
            return True
    for context in canister.call_contexts.values():
        if getattr(context.origin, "deadline", 0):
            return True
    queues = canister.queues
    for queue_map in (queues.input_queues, queues.output_queues):
        for queue in queue_map.values():
            for message in queue.elements:
                if message.deadline:
                    return True
    return False


def state_uses_logs(state: ReplicatedState) -> bool:
    """Some canister of ``state`` has a log (has logged a record, even if none is kept)."""
    for canister in state.canisters.values():
        if canister.log.next_index:
            return True
    return False


def canister_encoding_version(canister: CanisterState) -> int:
    """The version a state holding only ``canister`` is written at: 4 if it has a log, else
    3 if it holds deadlines, else 2 (what a canister snapshot records)."""
    if canister.log.next_index:
        return LOG_STATE_ENCODING_VERSION
    return BOUNDED_WAIT_STATE_ENCODING_VERSION if canister_uses_deadlines(canister) else STATE_ENCODING_VERSION


def state_uses_deadlines(state: ReplicatedState) -> bool:
    """Some canister (``canister_uses_deadlines``) or streamed message of ``state`` has a deadline."""
    for canister in state.canisters.values():
        if canister_uses_deadlines(canister):
            return True
    for stream in state.streams.values():
        for message in stream.messages:
            if message.deadline:
                return True
    return False


def topology_to_value(topology: NetworkTopology) -> tuple:
    """``[version, table, migrations, subnet keys]``, then ``node keys`` when there are any
    (a topology without them keeps the bytes it had before nodes had keys)."""
    value: tuple = (
        topology.registry_version,
        tuple(((r.start, r.end), s) for r, s in topology.routing_table.entries),
        tuple(((r.start, r.end), trace) for r, trace in topology.canister_migrations.entries),
        topology.subnet_public_keys,
    )
    if topology.node_public_keys:
        value = value + (topology.node_public_keys,)
    return value


def _range(value: Any) -> CanisterIdRange:
    start, end = check_tuple(value, "canister range", 2)
    try:
        return CanisterIdRange(check_u64(start, "range start"), check_u64(end, "range end"))
    except RoutingTableError as exc:
        raise CodecError(str(exc)) from exc


def topology_from_value(value: Any) -> NetworkTopology:
    fields = check_tuple(value, "topology")
    if len(fields) not in (4, 5):
        raise CodecError(f"topology: expected 4 or 5 elements, got {len(fields)}")
    version, table, migrations, keys = fields[:4]
    try:
        routing_table = RoutingTable(tuple(
            (_range(r), check_str(s, "subnet")) for r, s in (check_tuple(e, "route", 2) for e in check_tuple(table, "routing table"))))
    except RoutingTableError as exc:
        raise CodecError(str(exc)) from exc
    migration_entries = tuple(
        (_range(r), tuple(check_str(s, "trace subnet") for s in check_tuple(trace, "trace")))
        for r, trace in (check_tuple(e, "migration", 2) for e in check_tuple(migrations, "migrations")))
    subnet_keys = tuple(
        (check_str(s, "subnet"), check_bytes(k, "public key"))
        for s, k in (check_tuple(e, "subnet key", 2) for e in check_tuple(keys, "subnet keys")))
    node_keys = () if len(fields) == 4 else tuple(
        (check_str(s, "subnet"), tuple(check_bytes(k, "node public key") for k in check_tuple(ks, "node keys")))
        for s, ks in (check_tuple(e, "subnet's node keys", 2) for e in check_tuple(fields[4], "node keys")))
    if len(fields) == 5 and not node_keys:
        raise CodecError("topology: an empty node key list is encoded by its absence")
    return NetworkTopology(check_u64(version, "registry version"), routing_table,
                           CanisterMigrations(migration_entries), subnet_keys, node_keys)


def _queue_to_value(queue: Queue, to_value) -> tuple:
    return (queue.begin, queue.reserved_slots, tuple(to_value(m) for m in queue.elements))


def _queue_from_value(value: Any, from_value) -> Queue:
    begin, reserved, elements = check_tuple(value, "queue", 3)
    return Queue(check_u64(begin, "queue begin"), (from_value(m) for m in check_tuple(elements, "queue elements")),
                 check_u64(reserved, "reserved slots"))


def canister_log_to_value(log: CanisterLog) -> tuple:
    """``[next_index, [[index, timestamp_nanos, content], ...]]``."""
    return (log.next_index, tuple((r.index, r.timestamp_nanos, r.content) for r in log.records))


def canister_log_from_value(value: Any) -> CanisterLog:
    """Strict inverse of ``canister_log_to_value``: indices strictly increasing, below
    ``next_index``."""
    next_index, records = check_tuple(value, "canister log", 2)
    next_index = check_u64(next_index, "log next index")
    decoded = []
    previous = -1
    for entry in check_tuple(records, "log records"):
        index, timestamp, content = check_tuple(entry, "log record", 3)
        index = check_u64(index, "log record index")
        if not previous < index < next_index:
            raise CodecError(f"canister log: record index {index} is out of order or not below {next_index}")
        previous = index
        decoded.append(LogRecord(index, check_u64(timestamp, "log record time"), check_str(content, "log record")))
    return CanisterLog.of(next_index, decoded)


def _canister_to_value(c: CanisterState, version: int = STATE_ENCODING_VERSION) -> tuple:
    """A canister's fields at state encoding ``version`` (its log only from version 4 on)."""
    q = c.queues
    fields = (
        c.canister_id, c.module_name, c.module_hash, int(c.status), c.controller, c.certified_data,
        c.next_call_context_id, c.next_callback_id,
        tuple(call_context_to_value(x) for x in c.call_contexts.values()),
        tuple(callback_to_value(x) for x in c.callbacks.values()),
        _queue_to_value(q.ingress_queue, ingress_to_value),
        tuple((r, _queue_to_value(x, message_to_value)) for r, x in q.input_queues.items()),
        tuple((r, _queue_to_value(x, message_to_value)) for r, x in q.output_queues.items()),
        q.input_schedule,
        tuple(c.stable.items()),
        c.module_source,
    )
    if version >= LOG_STATE_ENCODING_VERSION:
        return fields + (canister_log_to_value(c.log),)
    return fields


def _canister_from_value(value: Any, version: int) -> CanisterState:
    fields = check_tuple(value, "canister", _CANISTER_ARITY[version])
    (cid, module_name, module_hash, status, controller, certified_data, next_ctx, next_cb, contexts, callbacks,
     ingress_queue, input_queues, output_queues, input_schedule, stable) = fields[:15]
    module_source = check_str(fields[15], "module source") if version >= 2 else ""
    try:
        status = CanisterStatus(check_u64(status, "status"))
    except ValueError as exc:
        raise CodecError(f"canister status: unknown value {status!r}") from exc
    c = CanisterState(check_u64(cid, "canister id"), check_str(module_name, "module name"),
                      check_bytes(module_hash, "module hash"), status=status, controller=check_bytes(controller, "controller"),
                      module_source=module_source)
    if module_source and hashlib.sha256(module_source.encode("utf-8")).digest() != c.module_hash:
        raise CodecError(f"canister {c.canister_id}: module hash is not the SHA-256 of its source")
    c.certified_data = check_bytes(certified_data, "certified data")
    c.next_call_context_id = check_u64(next_ctx, "next call context id")
    c.next_callback_id = check_u64(next_cb, "next callback id")
    for x in check_tuple(contexts, "call contexts"):
        ctx = call_context_from_value(x)
        c.call_contexts[ctx.call_context_id] = ctx
    for x in check_tuple(callbacks, "callbacks"):
        cb = callback_from_value(x)
        c.callbacks[cb.callback_id] = cb
    q = c.queues
    q.ingress_queue = _queue_from_value(ingress_queue, ingress_from_value)
    for target, entries in ((q.input_queues, input_queues), (q.output_queues, output_queues)):
        for entry in check_tuple(entries, "queues"):
            remote, queue = check_tuple(entry, "queue entry", 2)
            target[check_u64(remote, "remote canister")] = _queue_from_value(queue, message_from_value)
    q.input_schedule = None if input_schedule is None else check_u64(input_schedule, "input schedule")
    try:
        for entry in check_tuple(stable, "stable state"):
            key, item = check_tuple(entry, "stable entry", 2)
            c.stable[check_str(key, "stable key")] = item
    except StableValueError as exc:
        raise CodecError(f"stable state: {exc}") from exc
    c.stable.take_changed_keys()
    if version >= LOG_STATE_ENCODING_VERSION:
        c.log = canister_log_from_value(fields[16])
    return c


def _stream_to_value(stream: Stream) -> tuple:
    return (header_to_value(stream.header()), tuple(message_to_value(m) for m in stream.messages))


def _stream_from_value(value: Any) -> Stream:
    header, messages = check_tuple(value, "stream", 2)
    h = header_from_value(header)
    msgs = [message_from_value(m) for m in check_tuple(messages, "stream messages")]
    if h.end != h.begin + len(msgs):
        raise CodecError("stream: header end does not match its messages")
    return Stream(h.begin, msgs, h.signals_end, h.reject_signals)


def state_to_value(state: ReplicatedState) -> tuple:
    m = state.metadata
    if state_uses_logs(state):
        version = LOG_STATE_ENCODING_VERSION
    elif state_uses_deadlines(state):
        version = BOUNDED_WAIT_STATE_ENCODING_VERSION
    else:
        version = STATE_ENCODING_VERSION
    return (
        version, m.own_subnet_id, m.batch_number, m.batch_time, m.prev_state_hash,
        topology_to_value(m.network_topology), tuple(m.counters.items()),
        tuple(_canister_to_value(c, version) for c in state.canisters.values()),
        tuple((dst, _stream_to_value(s)) for dst, s in state.streams.items()),
        tuple((mid, ingress_status_to_value(s)) for mid, s in state.ingress_history.statuses.items()),
        _queue_to_value(state.management_queue, ingress_to_value),
    )


def state_encoding_version(value: Any) -> int:
    """The version of a ``state_to_value`` form (``CodecError`` if it is none that decodes)."""
    if not isinstance(value, tuple) or not value:
        raise CodecError("state: expected an array")
    version = value[0]
    if type(version) is not int or version not in _STATE_ARITY:
        raise CodecError(f"state: unknown encoding version {version!r}")
    return version


def state_from_value(value: Any) -> ReplicatedState:
    version = state_encoding_version(value)
    fields = check_tuple(value, "state", _STATE_ARITY[version])
    (_, own, batch_number, batch_time, prev_hash, topology, counters, canisters, streams, history) = fields[:10]
    state = ReplicatedState(check_str(own, "own subnet"), topology_from_value(topology))
    m = state.metadata
    m.batch_number = check_u64(batch_number, "batch number")
    m.batch_time = check_u64(batch_time, "batch time")
    m.prev_state_hash = check_bytes(prev_hash, "prev state hash")
    for entry in check_tuple(counters, "counters"):
        name, count = check_tuple(entry, "counter", 2)
        m.counters[check_str(name, "counter name")] = check_u64(count, "counter")
    for entry in check_tuple(canisters, "canisters"):
        c = _canister_from_value(entry, version)
        state.canisters[c.canister_id] = c
    for entry in check_tuple(streams, "streams"):
        dst, stream = check_tuple(entry, "stream entry", 2)
        state.streams[check_str(dst, "stream subnet")] = _stream_from_value(stream)
    for entry in check_tuple(history, "ingress history"):
        mid, status = check_tuple(entry, "ingress history entry", 2)
        state.ingress_history.set(check_bytes(mid, "message id", 32), ingress_status_from_value(status))
    if version >= 2:
        state.management_queue = _queue_from_value(fields[10], ingress_from_value)
    if version == LOG_STATE_ENCODING_VERSION:
        # One encoding per state: logs exactly in version 4 (deadlines or not).
        if not state_uses_logs(state):
            raise CodecError("state: version 4 holds no canister log")
    elif state_uses_deadlines(state) != (version == BOUNDED_WAIT_STATE_ENCODING_VERSION):
        # One encoding per state: deadlines exactly in version 3 (and never before it existed).
        raise CodecError(f"state: version {version} does not match whether the state holds deadlines")
    return state


def encode_state(state: ReplicatedState) -> bytes:
    return encode_unchecked(state_to_value(state))


def decode_state(data: bytes) -> ReplicatedState:
    """``state_from_value`` checks the type of every field (stable values and callback
    contexts with ``check_stable_value``), so the fast ``decode_typed`` applies."""
    return state_from_value(decode_typed(data, "state"))
