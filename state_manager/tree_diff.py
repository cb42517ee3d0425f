"""Diffing two state trees down to the smallest set of differing paths, with decoded values.

Both tries are walked in parallel, descending only into children whose digests differ
(equal digests mean equal subtrees), so the walk costs O(differences × depth × fan-out)
rather than the size of the state. A path is reported where the two sides stop being two
tries: a leaf that differs, a child present on one side only, or a leaf facing a subtree.
Leaves are shown decoded: the project's as canonical msgpack ``[version, value]``, those at
the IC's paths of the certified tree as the IC encodes them (nats in LEB128, statuses and
reject messages as text, other blobs in hex; ``state_manager.state_tree``). Labels are shown
as numbers where the tree layout says they are canister ids (8 bytes, or canister principals
under ``/canister``) or indices, ingress history entries as ``0x<message id>@<expiry>``,
others as text where printable, else as hex. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from state_manager.encoding import EncodingError, decode
from state_manager.hash_tree import Empty
from state_manager.ic_encoding import CANISTER_SUFFIX, IcEncodingError, decode_uleb128
from state_manager.labeled_trie import LabeledTrie

__all__ = ["PathDiff", "TreeDiff", "diff_tries", "render_path", "render_label", "describe_value", "to_jsonable",
           "ABSENT"]

ABSENT = None
#: Parents whose children are 8-byte big-endian numbers (canister ids, queue/stream indices, ids).
_NUMBERED = {b"canister_state", b"messages", b"ingress", b"call_contexts", b"callbacks", b"input",
             b"output"}
#: Parents whose children are message ids (under ``ingress_history`` after an 8-byte expiry).
_HEXED = {b"ingress_history", b"request_status"}
#: Top labels of the certified tree whose leaves are the IC's encodings.
_IC_PATHS = {b"time", b"request_status", b"canister", b"subnet", b"canister_ranges"}
_CANISTER_PRINCIPAL_BYTES = 10


@dataclass(frozen=True)
class PathDiff:
    path: tuple[bytes, ...]
    left: Any    # decoded leaf, a subtree summary, or None when absent
    right: Any

    @property
    def text(self) -> str:
        return render_path(self.path)


@dataclass(frozen=True)
class TreeDiff:
    paths: tuple[PathDiff, ...]
    more: int  # differing paths found beyond the limit

    @property
    def equal(self) -> bool:
        return not self.paths and not self.more


def _printable(label: bytes) -> bool:
    return bool(label) and all(0x20 < b < 0x7F for b in label)


def render_label(parent: bytes | None, label: bytes) -> str:
    if parent in _NUMBERED and len(label) == 8:
        return str(int.from_bytes(label, "big"))
    if parent == b"canister" and len(label) == _CANISTER_PRINCIPAL_BYTES and label.endswith(CANISTER_SUFFIX):
        return str(int.from_bytes(label[:8], "big"))
    if parent == b"ingress_history" and len(label) == 40:  # ``state_tree.history_label``
        return f"0x{label[8:].hex()}@{int.from_bytes(label[:8], 'big')}"
    if parent not in _HEXED and _printable(label):
        return label.decode("ascii")
    return "0x" + label.hex()


def render_path(path: tuple[bytes, ...]) -> str:
    parts = [render_label(path[i - 1] if i else None, label) for i, label in enumerate(path)]
    return "/" + "/".join(parts)


def to_jsonable(value: Any) -> Any:
    """Decoded values as JSON-friendly data: bytes as 0x-hex, arrays as lists."""
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(to_jsonable(k)): to_jsonable(v) for k, v in value.items()}
    return value


def _ic_leaf(path: tuple[bytes, ...]) -> bool:
    """Whether ``path`` (of the certified tree, or of the full tree through ``/certified``; no
    other top label of the full tree is one of ``_IC_PATHS``) is one of the IC's paths."""
    inner = path[1:] if path[:1] == (b"certified",) else path
    return bool(inner) and inner[0] in _IC_PATHS


def _describe_ic_leaf(path: tuple[bytes, ...], value: bytes) -> Any:
    last = path[-1]
    try:
        if last in (b"time", b"reject_code"):
            return decode_uleb128(value)
        if last in (b"status", b"reject_message"):
            return value.decode("utf-8")
    except (IcEncodingError, UnicodeDecodeError):
        pass
    return to_jsonable(value)


def describe_value(value: Any, path: tuple[bytes, ...] = ()) -> Any:
    """A leaf decoded (its value without the version) by the encoding of its ``path``, or a
    subtree's size."""
    if isinstance(value, LabeledTrie):
        return {"subtree_children": len(value)}
    if isinstance(value, Empty):
        return {"subtree_children": 0}
    if path and _ic_leaf(path):
        return _describe_ic_leaf(path, value)
    try:
        decoded = decode(value)
    except EncodingError:
        return to_jsonable(value)
    if isinstance(decoded, tuple) and len(decoded) == 2 and type(decoded[0]) is int:
        return to_jsonable(decoded[1])
    return to_jsonable(decoded)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Empty) and isinstance(b, Empty):
        return True
    if isinstance(a, LabeledTrie) or isinstance(b, LabeledTrie):
        return isinstance(a, LabeledTrie) and isinstance(b, LabeledTrie) and a.digest() == b.digest()
    return type(a) is type(b) and a == b


def _merged(left: LabeledTrie, right: LabeledTrie) -> Iterator[tuple[bytes, Any, Any]]:
    """``(label, left value | None, right value | None)`` over both tries in label order."""
    a, b = left.items(), right.items()
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x[0] < y[0]):
            yield x[0], x[1], None
            x = next(a, None)
        elif x is None or y[0] < x[0]:
            yield y[0], None, y[1]
            y = next(b, None)
        else:
            yield x[0], x[1], y[1]
            x, y = next(a, None), next(b, None)


def diff_tries(left: LabeledTrie, right: LabeledTrie, limit: int = 64) -> TreeDiff:
    """The differing paths of two tries (at most ``limit``, the rest counted in ``more``)."""
    found: list[PathDiff] = []
    more = 0
    stack: list[tuple[tuple[bytes, ...], LabeledTrie, LabeledTrie]] = [((), left, right)]
    while stack:
        path, a, b = stack.pop()
        if a.digest() == b.digest():
            continue
        children = []
        for label, x, y in _merged(a, b):
            if x is not None and y is not None:
                if isinstance(x, LabeledTrie) and isinstance(y, LabeledTrie):
                    if x.digest() != y.digest():
                        children.append((path + (label,), x, y))
                    continue
                if _same(x, y):
                    continue
            if len(found) < limit:
                here = path + (label,)
                found.append(PathDiff(here, None if x is None else describe_value(x, here),
                                      None if y is None else describe_value(y, here)))
            else:
                more += 1
        stack.extend(reversed(children))
    found.sort(key=lambda d: d.path)
    return TreeDiff(tuple(found), more)
