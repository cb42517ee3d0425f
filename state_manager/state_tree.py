"""The canonical state tree: the certified subset and the full state, hashed incrementally.

Certified tree (what certifications sign; what users, IC agents and peers verify), in the IC
interface specification's layout and leaf encodings (*The system state tree*) where the IC has
the path, and the project's own leaves (canonical msgpack ``[version, value]``) where it has not::

    /time                                              uleb128(batch time in ns)
    /metadata/height, /metadata/prev_state_hash        [1, value]                 (our own)
    /request_status/<message id>/status                UTF-8 text: received | processing | replied | rejected | done
                                /reply                 the reply blob             (replied only)
                                /reject_code           uleb128(code), 1..6        (rejected only)
                                /reject_message        UTF-8 text                 (rejected only)
    /streams/<subnet name>/header                      stream header leaf (codec) (our own: XNet)
    /streams/<subnet name>/messages/<8-byte BE index>  message leaf (codec)
    /canister/<canister principal>/module_hash         the 32 bytes               (absent while no code is installed)
                                  /certified_data      the blob
                                  /controllers         #6.55799([* principal])    (empty: no controller)
    /subnet/<subnet principal>/public_key              DER of the subnet's BLS key (state_manager.bls)
                              /canister_ranges         #6.55799([* [start, end]])  all of its ranges
                              /node/<node principal>/public_key   DER of the node's Ed25519 signing
                                                       key (what its query answers are checked under)
    /canister_ranges/<subnet principal>/<first start>  the same ranges, at most 5 per leaf (the
                                                       sharded layout current agents read)

A canister principal is its u64 id big-endian, then 0x01 0x01; a subnet principal is the
self-authenticating id of its key's DER, SHA-224(DER) · 0x02 (``state_manager.ic_encoding``, the
one implementation ``replica.ic`` builds on). The management canister (``2**64 - 1``) is no
canister of the state, so it has no subtree. A subnet the topology lists no key for (test
topologies) has no id, so neither ``/subnet`` nor ``/canister_ranges`` names it. A node's
principal is the self-authenticating id of its key; a subnet the topology lists no node keys
for has no ``node`` subtree. Requests
rejected here carry no IC error code, so there is no ``/error_code`` leaf.

Full tree (everything that determines future behaviour)::

    /certified                      the certified tree above, as a subtree
    /metadata/{own_subnet, registry_version, canister_migrations, counters}
    /ingress_history/<expiry><id>   the complete status record (8-byte BE expiry, then the id)
    /loopback/{header, messages/<index>}
    /canister_state/<8-byte id>/meta   module, status, controller, id counters, input schedule
                        /module/source                 the module's Python source (source canisters only)
                        /call_contexts/<id>, /callbacks/<id>
                        /log/next_index, /log/records/<index>   [timestamp, content] (canisters that logged)
                        /queues/ingress/<index>, /queues/{input,output}/<remote>/{reserved, messages/<index>}
                        /stable/<key>
    /management_queue/<index>       ingress to the management canister not executed yet (absent if none)

Every leaf outside the IC's paths is canonical msgpack ``[version, value]``. ``StateTreeBuilder``
keeps the tries of the last commit and applies only what changed: streams by their index
bounds (messages are immutable once routed), the ingress history and stable maps by their
change records, canisters by their dirty marks. ``build_state_trees`` builds the same tries
from scratch (no side effects): tests check the two always agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable

from .bls import public_key_der
from .canister_log import CanisterLog
from .canister_state import CanisterState
from .cbor import encode as cbor_encode
from .codec import (
    LEAF_VERSION, call_context_leaf_value, callback_leaf_value, encode_header_leaf, encode_message_leaf,
    ingress_status_to_value, ingress_to_value, message_leaf_value,
)
from .encoding import encode_unchecked
from .ic_encoding import (
    canister_principal_bytes, encode_canister_ranges, self_authenticating_id, shard_canister_ranges,
    subnet_principal_bytes, uleb128,
)
from .ingress_history import IngressHistory, IngressState, IngressStatus
from .labeled_trie import LabeledTrie, build_from_sorted
from .queues import CanisterQueues, Queue
from .replicated_state import ReplicatedState
from .routing_table import NetworkTopology
from .stable_map import StableMap
from .streams import Stream

__all__ = ["StateTrees", "StateTreeBuilder", "build_state_trees", "leaf", "index_label", "canister_label", "subnet_label",
           "history_label"]

EMPTY = LabeledTrie.empty()


def leaf(value: Any) -> bytes:
    """``encode([LEAF_VERSION, value])``. This module builds the values canonically, so the
    bytes come from ``encode_unchecked``: ``encode``'s value walk would add ~5 ms to one
    subnet's 50-batch replay (16,000 leaves, ~2%). The tests decode every leaf of busy
    states with the checking decoder (``encode(decode(leaf)) == leaf``)."""
    return encode_unchecked((LEAF_VERSION, value))


def index_label(index: int) -> bytes:
    return index.to_bytes(8, "big")


def canister_label(canister_id: int) -> bytes:
    """``/canister/<label>`` of the certified tree: the canister's principal (the full tree's
    ``/canister_state`` keeps the 8-byte id, ``index_label``)."""
    return canister_principal_bytes(canister_id)


def subnet_label(subnet: str) -> bytes:
    """``/streams/<label>``: the subnet's name (``/subnet`` and ``/canister_ranges`` are
    labelled by the subnet's principal, ``subnet_principal_bytes`` of its key)."""
    return subnet.encode("utf-8")


_STATUS_TEXT = {
    IngressState.RECEIVED: "received", IngressState.PROCESSING: "processing", IngressState.REPLIED: "replied",
    IngressState.REJECTED: "rejected", IngressState.DONE: "done",
}


@dataclass(frozen=True, slots=True)
class StateTrees:
    """The committed trees of one height: immutable, sharing structure with other heights."""

    height: int
    certified: LabeledTrie
    full: LabeledTrie

    @property
    def certified_root(self) -> bytes:
        return self.certified.digest()

    @property
    def full_hash(self) -> bytes:
        return self.full.digest()


# -- subtrees built from scratch ------------------------------------------------------------

_STATUS_LEAF = {state: text.encode("utf-8") for state, text in _STATUS_TEXT.items()}

# Without an answer the subtree is the same for every message: built once and shared (tries
# are immutable), so it is hashed once instead of per message. Answers are added to it, so
# their subtrees share its already hashed ``status`` node.
_BARE_STATUS_TREE = {state: build_from_sorted([(b"status", status_leaf)]) for state, status_leaf in _STATUS_LEAF.items()}


def history_label(message_id: bytes, status: IngressStatus) -> bytes:
    """``/ingress_history`` is keyed by expiry, then id: what a round changes there (new
    messages, answers to recent ones, expiring ones) is then a few runs of neighbouring
    labels that share their trie paths, instead of random ids each with its own path."""
    return status.expiry_time.to_bytes(8, "big") + message_id


def _request_status_tree(status: IngressStatus) -> LabeledTrie:
    state = status.state
    if state is IngressState.REPLIED and status.reply is not None:
        return _BARE_STATUS_TREE[state].insert(b"reply", status.reply)
    if state is IngressState.REJECTED:
        return _BARE_STATUS_TREE[state].update([
            (b"reject_code", uleb128(int(status.reject_code or 0))),
            (b"reject_message", (status.reject_message or "").encode("utf-8")),
        ])
    return _BARE_STATUS_TREE[state]


def _messages_tree(begin: int, messages: Iterable) -> LabeledTrie:
    return build_from_sorted((index_label(begin + k), encode_message_leaf(m)) for k, m in enumerate(messages))


def _stream_tree(stream: Stream, messages: LabeledTrie) -> LabeledTrie:
    return build_from_sorted([(b"header", encode_header_leaf(stream.header())), (b"messages", messages)])


def _subnet_trees(topology: NetworkTopology) -> tuple[LabeledTrie, LabeledTrie]:
    """``/subnet`` and ``/canister_ranges``: every subnet the topology has a key for, by its
    principal, with its ranges of the routing table (the registry deals every subnet its own
    key; were two keys equal, the subnet listed first would keep the id)."""
    table = topology.routing_table
    subnets: dict[bytes, tuple[bytes, tuple[tuple[bytes, bytes], ...], tuple[bytes, ...]]] = {}
    for subnet, key in topology.subnet_public_keys:
        label = subnet_principal_bytes(key)
        if label not in subnets:
            ranges = tuple((canister_principal_bytes(r.start), canister_principal_bytes(r.end))
                           for r in table.ranges_of(subnet))
            subnets[label] = (key, ranges, topology.node_keys(subnet))
    labels = sorted(subnets)
    subnet_tree = build_from_sorted((label, _one_subnet_tree(*subnets[label])) for label in labels)
    ranges_tree = build_from_sorted(
        (label, build_from_sorted(shard_canister_ranges(subnets[label][1]).items())) for label in labels)
    return subnet_tree, ranges_tree


def _one_subnet_tree(key: bytes, ranges: tuple[tuple[bytes, bytes], ...], node_keys: tuple[bytes, ...]) -> LabeledTrie:
    """``/subnet/<principal>``: its ranges, its nodes' keys by node principal, its key."""
    entries: list[tuple[bytes, Any]] = [(b"canister_ranges", encode_canister_ranges(ranges))]
    if node_keys:
        nodes = {self_authenticating_id(der): der for der in node_keys}
        entries.append((b"node", build_from_sorted(
            (principal, build_from_sorted([(b"public_key", nodes[principal])])) for principal in sorted(nodes))))
    entries.append((b"public_key", public_key_der(key)))
    return build_from_sorted(entries)


def _queue_tree(queue: Queue, to_value) -> LabeledTrie:
    return build_from_sorted((index_label(queue.begin + k), leaf(to_value(m))) for k, m in enumerate(queue.elements))


@lru_cache(maxsize=64)
def _drained_queue_tree(reserved: int) -> LabeledTrie:
    return build_from_sorted([(b"messages", EMPTY), (b"reserved", leaf(reserved))])


def _message_queue_tree(queue: Queue) -> LabeledTrie:
    """Like ``_queue_tree``, each message at its own leaf version (2 with a deadline)."""
    return build_from_sorted((index_label(queue.begin + k), encode_unchecked(message_leaf_value(m)))
                             for k, m in enumerate(queue.elements))


def _remote_queue_tree(queue: Queue) -> LabeledTrie:
    if not queue.elements:
        # Queues are usually drained by the end of a round and hold only reservations: then
        # the subtree depends on the count alone, so it is built and hashed once and shared.
        return _drained_queue_tree(queue.reserved_slots)
    return build_from_sorted([
        (b"messages", _message_queue_tree(queue)),
        (b"reserved", leaf(queue.reserved_slots)),
    ])


def _queues_tree(queues: CanisterQueues) -> LabeledTrie:
    def per_remote(queue_map) -> LabeledTrie:
        return build_from_sorted(
            (index_label(remote), _remote_queue_tree(queue)) for remote, queue in queue_map.items())

    return build_from_sorted([
        (b"ingress", _queue_tree(queues.ingress_queue, ingress_to_value)),
        (b"input", per_remote(queues.input_queues)),
        (b"output", per_remote(queues.output_queues)),
    ])


def _stable_tree(stable: StableMap) -> LabeledTrie:
    return build_from_sorted((k.encode("utf-8"), leaf(v)) for k, v in stable.items())


def _canister_meta(canister: CanisterState) -> bytes:
    return leaf((canister.module_name, canister.module_hash, int(canister.status), canister.controller,
                 canister.next_call_context_id, canister.next_callback_id, canister.queues.input_schedule))


def _module_tree(source: str) -> LabeledTrie:
    """``/canister_state/<id>/module``: a subtree (not a leaf) so that its digest, computed
    once, is reused while the canister's other parts change."""
    return build_from_sorted([(b"source", leaf(source))])


def _log_tree(log: CanisterLog) -> LabeledTrie | None:
    """``/canister_state/<id>/log`` (absent for a canister that never logged, so the trees of
    such canisters are as before logs existed): a subtree whose digest is reused while the
    log does not change."""
    if not log.next_index:
        return None
    return build_from_sorted([
        (b"next_index", leaf(log.next_index)),
        (b"records", build_from_sorted(
            (index_label(r.index), leaf((r.timestamp_nanos, r.content))) for r in log.records)),
    ])


def _canister_tree(canister: CanisterState, stable_tree: LabeledTrie, module_tree: LabeledTrie | None,
                   log_tree: LabeledTrie | None = None) -> LabeledTrie:
    items: list[tuple[bytes, LabeledTrie | bytes]] = [
        (b"call_contexts", build_from_sorted(
            (index_label(i), encode_unchecked(call_context_leaf_value(c))) for i, c in canister.call_contexts.items())),
        (b"callbacks", build_from_sorted(
            (index_label(i), encode_unchecked(callback_leaf_value(c))) for i, c in canister.callbacks.items())),
    ]
    if log_tree is not None:
        items.append((b"log", log_tree))
    items.append((b"meta", _canister_meta(canister)))
    if module_tree is not None:  # builtin modules have no source: their trees are as before
        items.append((b"module", module_tree))
    items.append((b"queues", _queues_tree(canister.queues)))
    items.append((b"stable", stable_tree))
    return build_from_sorted(items)


@lru_cache(maxsize=256)
def _controllers_leaf(controller: bytes) -> bytes:
    """``#6.55799([* principal])``: a canister has one controller here, or none yet (a few
    users control many canisters: each list is encoded once)."""
    return cbor_encode([controller] if controller else [])


def _certified_canister_tree(canister: CanisterState) -> LabeledTrie:
    items: list[tuple[bytes, bytes]] = [
        (b"certified_data", canister.certified_data),
        (b"controllers", _controllers_leaf(canister.controller)),
    ]
    if canister.module_hash:
        items.append((b"module_hash", canister.module_hash))
    return build_from_sorted(items)


def _management_queue_tree(state: ReplicatedState) -> LabeledTrie | None:
    queue = state.management_queue
    return _queue_tree(queue, ingress_to_value) if queue.elements else None


def _metadata_full_tree(state: ReplicatedState) -> LabeledTrie:
    metadata = state.metadata
    topology = metadata.network_topology
    migrations = tuple(((r.start, r.end), trace) for r, trace in topology.canister_migrations.entries)
    return build_from_sorted([
        (b"canister_migrations", leaf(migrations)),
        (b"counters", leaf(tuple(metadata.counters.items()))),
        (b"own_subnet", leaf(metadata.own_subnet_id)),
        (b"registry_version", leaf(topology.registry_version)),
    ])


def _certified_top(state: ReplicatedState, request_status: LabeledTrie, streams: LabeledTrie,
                   canisters: LabeledTrie, subnets: tuple[LabeledTrie, LabeledTrie]) -> LabeledTrie:
    metadata = state.metadata
    subnet_tree, ranges_tree = subnets
    return build_from_sorted([
        (b"canister", canisters),
        (b"canister_ranges", ranges_tree),
        (b"metadata", build_from_sorted([
            (b"height", leaf(metadata.batch_number)),
            (b"prev_state_hash", leaf(metadata.prev_state_hash)),
        ])),
        (b"request_status", request_status),
        (b"streams", streams),
        (b"subnet", subnet_tree),
        (b"time", uleb128(metadata.batch_time)),
    ])


def _full_top(state: ReplicatedState, certified: LabeledTrie, ingress_history: LabeledTrie,
              loopback: LabeledTrie | None, canister_state: LabeledTrie) -> LabeledTrie:
    items = [
        (b"canister_state", canister_state),
        (b"certified", certified),
        (b"ingress_history", ingress_history),
    ]
    if loopback is not None:
        items.append((b"loopback", loopback))
    management_queue = _management_queue_tree(state)
    if management_queue is not None:
        items.append((b"management_queue", management_queue))
    items.append((b"metadata", _metadata_full_tree(state)))
    return build_from_sorted(items)


def build_state_trees(state: ReplicatedState) -> StateTrees:
    """The certified and full trees of ``state`` from scratch (reads only; marks nothing)."""
    own = state.own_subnet_id
    history = state.ingress_history.statuses
    request_status = build_from_sorted((mid, _request_status_tree(s)) for mid, s in history.items())
    ingress_history = build_from_sorted(sorted(
        (history_label(mid, s), leaf(ingress_status_to_value(s))) for mid, s in history.items()))
    streams = build_from_sorted(
        (subnet_label(dst), _stream_tree(s, _messages_tree(s.begin, s.messages)))
        for dst, s in state.streams.items() if dst != own
    )
    loop = state.streams.get(own)
    loopback = _stream_tree(loop, _messages_tree(loop.begin, loop.messages)) if loop is not None else None
    canisters = build_from_sorted((canister_label(c), _certified_canister_tree(cs)) for c, cs in state.canisters.items())
    canister_state = build_from_sorted(
        (index_label(c), _canister_tree(cs, _stable_tree(cs.stable),
                                           _module_tree(cs.module_source) if cs.module_source else None,
                                           _log_tree(cs.log)))
        for c, cs in state.canisters.items())
    certified = _certified_top(state, request_status, streams, canisters, _subnet_trees(state.metadata.network_topology))
    full = _full_top(state, certified, ingress_history, loopback, canister_state)
    return StateTrees(state.metadata.batch_number, certified, full)


# -- incremental ----------------------------------------------------------------------------

def _update_messages(messages: LabeledTrie, stream: Stream, old_begin: int, old_end: int) -> LabeledTrie:
    """Remove indices ``[old_begin, min(new_begin, old_end))``, add ``[max(old_end, new_begin), new_end)``."""
    new_begin, new_end = stream.begin, stream.end
    # One batched update: adjacent indices share most of their path nodes.
    changes: list[tuple[bytes, bytes | None]] = [
        (index_label(index), None) for index in range(old_begin, min(new_begin, old_end))]
    changes += [(index_label(index), encode_message_leaf(stream.messages[index - new_begin]))
                for index in range(max(old_end, new_begin), new_end)]
    return messages.update(changes)


class StateTreeBuilder:
    """Incremental maintenance of the state trees of one subnet's successive states.

    Feed it every committed state in order (``update``); it consumes the change records
    (dirty marks, changed keys and ids) of the state it is given.
    """

    def __init__(self) -> None:
        self._trees: StateTrees | None = None
        self._streams: dict[str, tuple[Stream, int, int, LabeledTrie]] = {}
        self._loopback: tuple[Stream, int, int, LabeledTrie] | None = None
        self._canisters: dict[int, CanisterState] = {}
        self._stable: dict[int, LabeledTrie] = {}
        # /canister_state/<id>/module of source canisters, with the module hash it was built for.
        self._modules: dict[int, tuple[bytes, LabeledTrie]] = {}
        # /canister_state/<id>/log of canisters that logged, with the (immutable) log it was built for.
        self._logs: dict[int, tuple[CanisterLog, LabeledTrie]] = {}
        # (certified_data, module_hash, controller) under /canister/<id>: most commits change none.
        self._certified_values: dict[int, tuple[bytes, bytes, bytes]] = {}
        self._history: IngressHistory | None = None
        self._request_status = EMPTY
        self._ingress_history = EMPTY
        self._history_labels: dict[bytes, bytes] = {}  # message id -> its /ingress_history label
        self._certified_canisters = EMPTY
        self._canister_state = EMPTY
        self._topology: NetworkTopology | None = None
        self._subnets: tuple[LabeledTrie, LabeledTrie] = (EMPTY, EMPTY)

    @property
    def trees(self) -> StateTrees | None:
        return self._trees

    def update(self, state: ReplicatedState) -> StateTrees:
        self._update_ingress_history(state)
        streams = self._update_streams(state)
        loopback = self._update_loopback(state)
        self._update_canisters(state)
        topology = state.metadata.network_topology
        if topology is not self._topology:
            self._topology, self._subnets = topology, _subnet_trees(topology)
        certified = _certified_top(state, self._request_status, streams, self._certified_canisters, self._subnets)
        full = _full_top(state, certified, self._ingress_history, loopback, self._canister_state)
        self._trees = StateTrees(state.metadata.batch_number, certified, full)
        return self._trees

    def _update_ingress_history(self, state: ReplicatedState) -> None:
        history = state.ingress_history
        changed = history.take_changed_ids()
        if history is not self._history:
            self._history = history
            statuses = history.statuses
            self._request_status = build_from_sorted((m, _request_status_tree(s)) for m, s in statuses.items())
            self._history_labels = {m: history_label(m, s) for m, s in statuses.items()}
            self._ingress_history = build_from_sorted(sorted(
                (self._history_labels[m], leaf(ingress_status_to_value(s))) for m, s in statuses.items()))
            return
        request_status, labels = self._request_status, self._history_labels
        history_changes: list[tuple[bytes, bytes | None]] = []
        for message_id in changed:
            status = history.get(message_id)
            old_label = labels.get(message_id)
            if status is None:
                if old_label is not None:
                    request_status = request_status.remove(message_id)
                    history_changes.append((old_label, None))
                    del labels[message_id]
                continue
            request_status = request_status.insert(message_id, _request_status_tree(status))
            label = labels[message_id] = history_label(message_id, status)
            if old_label is not None and old_label != label:
                history_changes.append((old_label, None))
            history_changes.append((label, leaf(ingress_status_to_value(status))))
        self._request_status = request_status
        # Neighbours by expiry: one batched update shares their paths (see ``history_label``).
        self._ingress_history = self._ingress_history.update(history_changes)

    def _stream_subtree(self, previous, stream: Stream) -> tuple[tuple, LabeledTrie]:
        if previous is not None and previous[0] is stream:
            messages = _update_messages(previous[3], stream, previous[1], previous[2])
        else:
            messages = _messages_tree(stream.begin, stream.messages)
        return (stream, stream.begin, stream.end, messages), _stream_tree(stream, messages)

    def _update_streams(self, state: ReplicatedState) -> LabeledTrie:
        own = state.own_subnet_id
        previous_streams = self._streams
        found = self._trees.certified.get_subtree(b"streams") if self._trees is not None else None
        trees = EMPTY if found is None else found
        current: dict[str, tuple] = {}
        for dst, stream in state.streams.items():
            if dst == own:
                continue
            previous = previous_streams.get(dst)
            if previous is not None and previous[0] is stream and previous[1] == stream.begin \
                    and previous[2] == stream.end and previous[3] is not None and _header_unchanged(trees, dst, stream):
                current[dst] = previous
                continue
            current[dst], subtree = self._stream_subtree(previous, stream)
            trees = trees.insert(subnet_label(dst), subtree)
        for dst in previous_streams:
            if dst not in current:
                trees = trees.remove(subnet_label(dst))
        self._streams = current
        return trees

    def _update_loopback(self, state: ReplicatedState) -> LabeledTrie | None:
        stream = state.streams.get(state.own_subnet_id)
        if stream is None:
            self._loopback = None
            return None
        self._loopback, subtree = self._stream_subtree(self._loopback, stream)
        return subtree

    def _update_canisters(self, state: ReplicatedState) -> None:
        certified, full = self._certified_canisters, self._canister_state
        previous = self._canisters
        current: dict[int, CanisterState] = {}
        for cid, canister in state.canisters.items():
            current[cid] = canister
            same = previous.get(cid) is canister
            if same and not canister.is_dirty():
                continue
            stable = self._stable.get(cid) if same else None
            changed = canister.stable.take_changed_keys()
            if stable is None:
                stable = _stable_tree(canister.stable)
            else:
                for key in changed:
                    raw = key.encode("utf-8")
                    if key in canister.stable:
                        stable = stable.insert(raw, leaf(canister.stable[key]))
                    elif raw in stable:
                        stable = stable.remove(raw)
            self._stable[cid] = stable
            certified_value = (canister.certified_data, canister.module_hash, canister.controller)
            if self._certified_values.get(cid) != certified_value:
                self._certified_values[cid] = certified_value
                certified = certified.insert(canister_label(cid), _certified_canister_tree(canister))
            full = full.insert(index_label(cid), _canister_tree(canister, stable, self._module_subtree(cid, canister),
                                                     self._log_subtree(cid, canister)))
            canister.mark_clean()
        for cid in previous:
            if cid not in current:
                certified = certified.remove(canister_label(cid))
                full = full.remove(index_label(cid))
                self._stable.pop(cid, None)
                self._modules.pop(cid, None)
                self._logs.pop(cid, None)
                self._certified_values.pop(cid, None)
        self._canisters = current
        self._certified_canisters, self._canister_state = certified, full


    def _module_subtree(self, cid: int, canister: CanisterState) -> LabeledTrie | None:
        if not canister.module_source:
            self._modules.pop(cid, None)
            return None
        cached = self._modules.get(cid)
        if cached is not None and cached[0] == canister.module_hash:
            return cached[1]
        tree = _module_tree(canister.module_source)
        self._modules[cid] = (canister.module_hash, tree)
        return tree


    def _log_subtree(self, cid: int, canister: CanisterState) -> LabeledTrie | None:
        log = canister.log
        cached = self._logs.get(cid)
        if cached is not None and cached[0] is log:
            return cached[1]
        tree = _log_tree(log)
        if tree is None:
            self._logs.pop(cid, None)
        else:
            self._logs[cid] = (log, tree)
        return tree


def _header_unchanged(streams: LabeledTrie, dst: str, stream: Stream) -> bool:
    subtree = streams.get_subtree(subnet_label(dst))
    return subtree is not None and subtree.get_leaf(b"header") == encode_header_leaf(stream.header())
