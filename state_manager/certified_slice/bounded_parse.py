"""Parsing a slice's payload and witness within what the payload can need (decoder steps 2, 3).

Remote trees are parsed by ``tree_encoding.parse_tree`` (msgpack's C unpacker) into nested
tuples, ``(tag, ...)``, and never turned into ``HashTree`` objects. Its hook runs on every
array as soon as it is complete (post-order), so each node is checked — and counted against
a budget — before anything above it is parsed: the first bad or surplus node stops the
parse, and the work to refuse any input is bounded by what the payload can need, never by
the input's size:

* payload: every node is a fork, labeled node or leaf (``PrunedInPayload``,
  ``EmptyInPayload``), and the payload fits its witness (``PayloadExceedsWitness``: each leaf
  position needs 40 bytes plus its label there);
* witness: at most the nodes, positions and pruned nodes of ``witness_budget`` for this
  payload (``WitnessOverBudget`` subclasses); its root digest is computed while parsing.

Nesting is capped by the unpacker (``tree_encoding.MAX_PARSE_DEPTH``); ``max_depth`` is then
checked by the walks over the parsed (and already counted) nodes, and the canonical form by
re-encoding the tuples. Failures of the bytes themselves become ``PayloadNotCanonical`` /
``WitnessNotCanonical`` (``TreeTooDeep`` for nesting), whatever the tree decoder named them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from state_manager import tree_encoding as te
from state_manager.hash_tree import domain_sep, hash_empty
from state_manager.sha256 import sha256_of
from state_manager.tree_encoding import TAG_EMPTY, TAG_FORK, TAG_LABELED, TAG_LEAF, TAG_NAMES, TAG_PRUNED, node_tag

from .errors import (
    EmptyInPayload,
    MalformedWitness,
    PayloadDuplicateLabel,
    PayloadExceedsWitness,
    PayloadLayoutError,
    PayloadNotCanonical,
    PayloadUnsortedLabels,
    PrunedInPayload,
    TreeTooDeep,
    WitnessNotCanonical,
    WitnessTooManyNodes,
    WitnessTooManyPositions,
    WitnessTooManyPruned,
)
from .layout import HEADER_LABEL, HEIGHT_LABEL, MESSAGES_LABEL, METADATA_LABEL, STREAMS_LABEL

__all__ = [
    "PayloadParts",
    "WitnessBudget",
    "ParsedWitness",
    "parse_nodes",
    "parse_payload",
    "witness_budget",
    "parse_witness",
]

# The witness's digests are computed while parsing, with hash_tree's formulas (``reconstruct``).
_FORK_SEP = domain_sep("ic-hashtree-fork")
_LABELED_SEP = domain_sep("ic-hashtree-labeled")
_LEAF_SEP = domain_sep("ic-hashtree-leaf")
_EMPTY_DIGEST = hash_empty()


def parse_nodes(data: bytes, hook: Callable[[tuple], tuple], not_canonical: type) -> tuple:
    """``tree_encoding.parse_tree(data, hook)``: its refusals of the bytes, and those of
    ``node_tag`` in the hook, as ``not_canonical`` (``TreeTooDeep`` for nesting beyond the
    parser); the hook's own errors pass unchanged."""
    try:
        return te.parse_tree(data, hook)
    except te.TreeTooDeepError as exc:
        raise TreeTooDeep(f"the tree nests deeper than {te.MAX_PARSE_DEPTH} levels") from exc
    except te.TreeDecodeError as exc:
        raise not_canonical(f"not one encoded tree: {exc}") from exc


def _validate_canonical(value: tuple, data: bytes, not_canonical: type) -> None:
    """The bytes are the canonical encoding of the tree they hold (the tree was walked, so
    its depth is within bounds)."""
    if te.encode_nested(value) != data:
        raise not_canonical("the bytes are not the canonical encoding of the tree they hold")


def _validate_depth(depth: int, max_depth: int) -> None:
    if depth > max_depth:
        raise TreeTooDeep(f"the tree nests deeper than {max_depth} levels")


def _group(node: tuple, depth: int, max_depth: int) -> list[tuple[tuple, int]]:
    """The fork group of ``node`` (``hash_tree.flatten_forks``), left to right, with depths."""
    out: list[tuple[tuple, int]] = []
    stack = [(node, depth)]
    while stack:
        member, level = stack.pop()
        _validate_depth(level, max_depth)
        tag = member[0]
        if tag == TAG_FORK:
            stack.append((member[2], level + 1))
            stack.append((member[1], level + 1))
        elif tag != TAG_EMPTY:
            out.append((member, level))
    return out


# --------------------------------------------------------------------------- payload


@dataclass(frozen=True, slots=True)
class PayloadParts:
    """What a payload carries: its stream, header leaf and ``(label, leaf)`` messages."""

    dst: str
    header_leaf: bytes
    messages: tuple[tuple[bytes, bytes], ...]


#: Fewest bytes with which a witness reveals one position, ``Labeled(label, Pruned(digest))``:
#: ``93 02 c4 <len> label 92 04 c4 20 <32 bytes>``, i.e. this plus the label.
_POSITION_BYTES = 40


def _payload_hook(witness_bytes: int) -> Callable[[tuple], tuple]:
    """The parse hook of step 2: every payload node is a fork, labeled node or leaf, and
    the payload fits the witness that must reveal it. Each leaf position (``Labeled(l,
    Leaf(v))``) needs ``_POSITION_BYTES + len(l)`` witness bytes, so an honest payload of
    ``k`` messages has ``3k + 5`` nodes for a witness of at least ``48k + 46`` bytes: more
    than ``witness_bytes // 16 + 8`` nodes, or positions the witness has no room for, stop
    the parse (``PayloadExceedsWitness``)."""
    max_nodes = witness_bytes // 16 + 8
    nodes = need = 0

    def hook(node: tuple) -> tuple:
        nonlocal nodes, need
        nodes += 1
        tag = node_tag(node)
        if tag == TAG_PRUNED:
            raise PrunedInPayload("the payload contains a pruned subtree")
        if tag == TAG_EMPTY:
            raise EmptyInPayload("the payload contains an empty subtree")
        if tag == TAG_LABELED and node[2][0] == TAG_LEAF:
            need += _POSITION_BYTES + len(node[1])
            if need > witness_bytes:
                raise PayloadExceedsWitness(f"the payload has more leaves than a {witness_bytes}-byte witness can reveal")
        if nodes > max_nodes:
            raise PayloadExceedsWitness(f"the payload has more nodes than a {witness_bytes}-byte witness allows")
        return node

    return hook


def _labeled_group(node: tuple, depth: int, max_depth: int, where: str) -> list[tuple[tuple, int]]:
    """A payload fork group of labeled nodes with strictly increasing labels."""
    group = _group(node, depth, max_depth)
    previous = None
    for member, _ in group:
        if member[0] != TAG_LABELED:
            raise PayloadLayoutError(f"{where} holds a {TAG_NAMES[member[0]]} node, expected labeled children")
        label = member[1]
        if previous is not None and label <= previous:
            if label == previous:
                raise PayloadDuplicateLabel(f"label {label!r} occurs twice in {where}")
            raise PayloadUnsortedLabels(f"label {label!r} follows the larger label {previous!r} in {where}")
        previous = label
    return group


def parse_payload(data: bytes, witness_bytes: int, max_depth: int) -> PayloadParts:
    """Step 2 for the payload bytes: it parses, holds no ``Pruned``/``Empty`` and fits a
    witness of ``witness_bytes`` (each refused at the first node in excess), is exactly
    ``/streams/<dst>/{header: Leaf, messages?: {label: Leaf, ...}}`` with increasing labels
    in every fork group, within ``max_depth``, and is canonical."""
    payload = parse_nodes(data, _payload_hook(witness_bytes), PayloadNotCanonical)
    top = _labeled_group(payload, 1, max_depth, "the payload root")
    if len(top) != 1 or top[0][0][1] != STREAMS_LABEL:
        raise PayloadLayoutError("the payload root must hold exactly the label 'streams'")
    streams = _labeled_group(top[0][0][2], top[0][1] + 1, max_depth, "/streams")
    if len(streams) != 1:
        raise PayloadLayoutError(f"/streams must hold exactly one stream, got {len(streams)}")
    (_, dst_label, stream), level = streams[0]
    try:
        dst = dst_label.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadLayoutError("the stream label is not UTF-8") from exc
    children = _labeled_group(stream, level + 1, max_depth, "/streams/<dst>")
    labels = [child[1] for child, _ in children]
    if labels not in ([HEADER_LABEL], [HEADER_LABEL, MESSAGES_LABEL]):
        raise PayloadLayoutError(f"/streams/<dst> must hold 'header' and optionally 'messages', got {labels!r}")
    (_, _, header), level = children[0]
    _validate_depth(level + 1, max_depth)
    if header[0] != TAG_LEAF:
        raise PayloadLayoutError("/streams/<dst>/header is not a leaf")
    messages: list[tuple[bytes, bytes]] = []
    if len(children) == 2:
        (_, _, group), level = children[1]
        for (_, label, leaf), position_depth in _labeled_group(group, level + 1, max_depth, "/streams/<dst>/messages"):
            _validate_depth(position_depth + 1, max_depth)
            if leaf[0] != TAG_LEAF:
                raise PayloadLayoutError(f"message {label!r} is not a leaf")
            messages.append((label, leaf[1]))
    _validate_canonical(payload, data, PayloadNotCanonical)
    return PayloadParts(dst, header[1], tuple(messages))


# --------------------------------------------------------------------------- witness


@dataclass(frozen=True, slots=True)
class WitnessBudget:
    """What a witness may hold (``witness_budget``); exceeding any bound stops the parse."""

    positions: int
    pruned: int
    nodes: int


#: Runs of consecutive positions an honest witness reveals: the header with the messages
#: ``[witness_begin, msg_end)`` (adjacent under ``/streams/<dst>``), and ``/metadata/height``;
#: counted as three to leave room.
_WITNESS_RUNS = 3


def witness_budget(payload_messages: int, max_extra_positions: int, max_depth: int) -> WitnessBudget:
    """Bounds on the witness of a slice whose payload carries ``payload_messages`` messages.

    The encoder's witness is the union ``U`` of the paths from the root to its *positions*
    (labeled nodes over a pruned leaf digest): the header, ``/metadata/height`` and the
    messages ``[witness_begin, msg_end)``, i.e. ``p <= k + X + 2`` positions for ``k`` payload
    messages and ``X`` messages revealed beyond them (``witness_begin < msg_begin``, or a
    payload cut by ``restrict_certified_slice``), plus one pruned sibling for every fork of
    ``U`` with one child in ``U``. The positions form ``R <= 3`` runs of consecutive leaves of
    the certified tree. Every node is then one of: a position's digest or label (``2p``); a
    fork with both children in ``U`` (``<= p - 1``, as ``U`` has ``p`` leaves); a unary node of
    ``U`` — a path label or a fork with a pruned sibling — which lies on the path to the first
    or the last position of a run (a pruned side strictly inside a run would skip leaves of
    it), so ``<= 2·R·D`` of them for paths of at most ``D = max_depth`` nodes; or such a pruned
    sibling (``<= 2·R·D``). Hence:

        positions   <= k + X + 2
        bare pruned <= 2·R·D                     (pruned nodes not under a label)
        nodes       <= 3·(k + X + 2) + 4·R·D

    A witness for a header-only slice with nothing revealed beyond the payload has at most
    ``3·2 + 12·256 = 3,078`` nodes at the default depth; ``X`` is the caller's to choose
    (``DEFAULT_MAX_EXTRA_POSITIONS``).
    """
    positions = payload_messages + max_extra_positions + 2
    unary = 2 * _WITNESS_RUNS * max_depth
    return WitnessBudget(positions, unary, 3 * positions + 2 * unary)


@dataclass(frozen=True, slots=True)
class ParsedWitness:
    """What the decoder needs of a parsed witness."""

    root: bytes  # reconstruct(witness)
    header: Optional[tuple]  # the node at /streams/<dst>/header
    messages: Optional[tuple]  # the node at /streams/<dst>/messages
    revealed: dict[bytes, tuple]  # label -> node of the messages fork group
    height: Optional[tuple]  # the node at /metadata/height
    has_leaf: bool


def _witness_hook(budget: WitnessBudget) -> tuple[Callable[[tuple], tuple], list[bytes], list[bool]]:
    """The parse hook of step 3: counts nodes, positions and bare pruned nodes against
    ``budget`` (raising at the first one too many) and computes every node's digest on a
    stack (post-order, so the root's digest is the last one left)."""
    digests: list[bytes] = []
    push, pop = digests.append, digests.pop
    has_leaf = [False]
    nodes = positions = pruned = 0
    max_nodes, max_positions, max_pruned = budget.nodes, budget.positions, budget.pruned

    def hook(node: tuple) -> tuple:
        nonlocal nodes, positions, pruned
        nodes += 1
        if nodes > max_nodes:
            raise WitnessTooManyNodes(f"the witness has more than {max_nodes} nodes")
        tag = node_tag(node)
        if tag == TAG_PRUNED:
            push(node[1])
        elif tag == TAG_LABELED:
            if node[2][0] == TAG_PRUNED:
                positions += 1
                if positions > max_positions:
                    raise WitnessTooManyPositions(f"the witness reveals more than {max_positions} positions")
            push(sha256_of(_LABELED_SEP, node[1], pop()))
        elif tag == TAG_FORK:
            if node[1][0] == TAG_PRUNED:
                pruned += 1
            if node[2][0] == TAG_PRUNED:
                pruned += 1
            if pruned > max_pruned:
                raise WitnessTooManyPruned(f"the witness has more than {max_pruned} pruned nodes outside positions")
            right = pop()
            push(sha256_of(_FORK_SEP, pop(), right))
        elif tag == TAG_LEAF:
            has_leaf[0] = True
            push(sha256_of(_LEAF_SEP, node[1]))
        else:
            push(_EMPTY_DIGEST)
        return node

    return hook, digests, has_leaf


# Where a fork group of the witness sits, for collecting the nodes the decoder checks.
_AT_ROOT, _AT_METADATA, _AT_STREAMS, _AT_STREAM, _AT_MESSAGES, _ELSEWHERE = range(6)


def parse_witness(data: bytes, dst_label: bytes, budget: WitnessBudget, max_depth: int) -> ParsedWitness:
    """Step 3 for the witness bytes: parsed within ``budget`` (the first surplus node stops
    it), every fork group well-formed (labels strictly increasing, a leaf alone) within
    ``max_depth``, canonical; returns its root digest and the nodes at the header, messages
    and ``/metadata/height`` positions."""
    hook, digests, has_leaf = _witness_hook(budget)
    witness = parse_nodes(data, hook, WitnessNotCanonical)
    header = messages = height = None
    revealed: dict[bytes, tuple] = {}
    groups = [(witness, 1, _AT_ROOT)]
    while groups:
        top, depth, where = groups.pop()
        group = _group(top, depth, max_depth)
        previous = None
        for member, level in group:
            tag = member[0]
            if tag == TAG_LEAF:
                if len(group) > 1:
                    raise MalformedWitness("a leaf shares its fork group with other nodes")
                continue
            if tag != TAG_LABELED:
                continue
            label, sub = member[1], member[2]
            if previous is not None and label <= previous:
                kind = "occurs twice" if label == previous else f"follows the larger label {previous!r}"
                raise MalformedWitness(f"label {label!r} {kind} in a witness fork group")
            previous = label
            inner = _ELSEWHERE
            if where == _AT_MESSAGES:
                revealed[label] = sub
            elif where == _AT_ROOT:
                inner = _AT_STREAMS if label == STREAMS_LABEL else _AT_METADATA if label == METADATA_LABEL else inner
            elif where == _AT_STREAMS:
                inner = _AT_STREAM if label == dst_label else inner
            elif where == _AT_STREAM:
                if label == HEADER_LABEL:
                    header = sub
                elif label == MESSAGES_LABEL:
                    messages, inner = sub, _AT_MESSAGES
            elif where == _AT_METADATA and label == HEIGHT_LABEL:
                height = sub
            if sub[0] == TAG_PRUNED:
                _validate_depth(level + 1, max_depth)
            else:
                groups.append((sub, level + 1, inner))
    _validate_canonical(witness, data, WitnessNotCanonical)
    return ParsedWitness(digests[-1], header, messages, revealed, height, has_leaf[0])
