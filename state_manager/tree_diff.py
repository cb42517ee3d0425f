"""Diffing two state trees down to the smallest set of differing paths, with decoded values.

Both tries are walked in parallel, descending only into children whose digests differ
(equal digests mean equal subtrees), so the walk costs O(differences × depth × fan-out)
rather than the size of the state. A path is reported where the two sides stop being two
tries: a leaf that differs, a child present on one side only, or a leaf facing a subtree.
Leaves are canonical msgpack ``[version, value]`` and are shown decoded; labels are shown
as numbers where the tree layout says they are canister ids or indices, ingress history
entries as ``0x<message id>@<expiry>``, others as text where printable, else as hex. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from state_manager.encoding import EncodingError, decode
from state_manager.hash_tree import Empty
from state_manager.labeled_trie import LabeledTrie

__all__ = ["PathDiff", "TreeDiff", "diff_tries", "render_path", "render_label", "describe_value", "to_jsonable",
           "ABSENT"]

ABSENT = None
#: Parents whose children are 8-byte big-endian numbers (canister ids, queue/stream indices, ids).
_NUMBERED = {b"canister_state", b"canister", b"messages", b"ingress", b"call_contexts", b"callbacks", b"input",
             b"output"}
#: Parents whose children are message ids (under ``ingress_history`` after an 8-byte expiry).
_HEXED = {b"ingress_history", b"request_status"}


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


def describe_value(value: Any) -> Any:
    """A leaf decoded (its value without the version), or a subtree's size."""
    if isinstance(value, LabeledTrie):
        return {"subtree_children": len(value)}
    if isinstance(value, Empty):
        return {"subtree_children": 0}
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
                found.append(PathDiff(path + (label,), None if x is None else describe_value(x),
                                      None if y is None else describe_value(y)))
            else:
                more += 1
        stack.extend(reversed(children))
    found.sort(key=lambda d: d.path)
    return TreeDiff(tuple(found), more)
