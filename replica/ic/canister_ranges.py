"""A subnet's canister ranges as the state tree states them, in both of the IC's layouts.

The value is a list of closed ranges of principals, ordered, encoded as CBOR (the interface
specification, *Subnet information*)::

    canister_ranges = #6.55799([* [principal, principal]])      principal = bytes .size (0..29)

The IC's state tree carries it twice, and agents read one or the other:

* flat:    ``/subnet/<subnet_id>/canister_ranges``, all of the subnet's ranges in one leaf;
* sharded: ``/canister_ranges/<subnet_id>/<label>``, at most 5 ranges per leaf, each leaf
  labelled by the first principal it covers; a subnet without ranges has one leaf with the
  empty list, labelled by canister 0.

A delegation's certificate need not reveal every shard, and every revealed leaf is signed by
the root subnet, so a canister belongs to the delegated subnet if any range of any revealed
leaf, in either layout, contains it (``check_canister_in_ranges``).

Both encodings are ``state_manager.ic_encoding``'s (the state tree states them); this module
works on ``Principal`` values and adds the decoder and the checks.
"""

from __future__ import annotations

from collections.abc import Sequence

from state_manager import ic_encoding
from state_manager.hash_tree import Found, HashTree, Labeled, Leaf, flatten_forks, lookup_path
from state_manager.ic_encoding import EMPTY_RANGES_LABEL, MAX_RANGES_PER_LEAF

from . import cbor
from .errors import CanisterOutsideRanges, CanisterRangesMissing, CertificateMalformed, CborRefused
from .principal import MAX_PRINCIPAL_BYTES, Principal

__all__ = [
    "MAX_RANGES_PER_LEAF", "EMPTY_RANGES_LABEL", "CanisterRange", "encode_canister_ranges", "decode_canister_ranges",
    "ranges_contain", "shard_canister_ranges", "revealed_ranges", "check_canister_in_ranges",
]

_MAX_RANGES_BYTES = 1 << 20

CanisterRange = tuple[Principal, Principal]


def encode_canister_ranges(ranges: Sequence[CanisterRange]) -> bytes:
    """The leaf value of ``ranges``: the self-describe tag, then ``[[start, end], ...]``."""
    return ic_encoding.encode_canister_ranges([(start.raw, end.raw) for start, end in ranges])


def decode_canister_ranges(blob: bytes) -> tuple[CanisterRange, ...]:
    """The ranges a leaf states; ``CertificateMalformed`` unless each is ``[start, end]`` of
    principals with ``start <= end``."""
    try:
        value = cbor.decode(blob, max_bytes=_MAX_RANGES_BYTES, max_depth=2)
    except CborRefused as exc:
        raise CertificateMalformed(f"canister ranges are not CBOR: {exc}") from exc
    if type(value) is not list:
        raise CertificateMalformed("canister ranges are an array of [start, end]")
    ranges = []
    for item in value:
        if (type(item) is not list or len(item) != 2
                or any(type(p) is not bytes or len(p) > MAX_PRINCIPAL_BYTES for p in item) or item[0] > item[1]):
            raise CertificateMalformed("a canister range is [start, end], principals with start <= end")
        ranges.append((Principal(item[0]), Principal(item[1])))
    return tuple(ranges)


def ranges_contain(ranges: Sequence[CanisterRange], principal: Principal) -> bool:
    """Whether some closed range contains ``principal`` (principals compare as bytes)."""
    return any(start <= principal <= end for start, end in ranges)


def shard_canister_ranges(ranges: Sequence[CanisterRange]) -> dict[bytes, bytes]:
    """The sharded layout's leaves of one subnet: label (first start) → value, in order."""
    return ic_encoding.shard_canister_ranges([(start.raw, end.raw) for start, end in ranges])


def revealed_ranges(tree: HashTree, subnet_id: bytes) -> tuple[CanisterRange, ...] | None:
    """Every range ``tree`` reveals for ``subnet_id`` in either layout; ``None`` if it reveals
    none (neither the flat leaf nor any shard)."""
    leaves: list[bytes] = []
    flat = lookup_path(tree, [b"subnet", subnet_id, b"canister_ranges"])
    if isinstance(flat, Found) and isinstance(flat.tree, Leaf):
        leaves.append(flat.tree.value)
    shards = lookup_path(tree, [b"canister_ranges", subnet_id])
    if isinstance(shards, Found):
        leaves += [node.subtree.value for node in flatten_forks(shards.tree)
                   if isinstance(node, Labeled) and isinstance(node.subtree, Leaf)]
    if not leaves:
        return None
    return tuple(r for leaf in leaves for r in decode_canister_ranges(leaf))


def check_canister_in_ranges(tree: HashTree, subnet_id: bytes, canister_id: Principal) -> None:
    """Raise unless ``tree`` shows ``canister_id`` in the ranges of ``subnet_id``:
    ``CanisterRangesMissing`` if it reveals no ranges, ``CanisterOutsideRanges`` if none holds it."""
    ranges = revealed_ranges(tree, subnet_id)
    if ranges is None:
        raise CanisterRangesMissing(f"the delegation reveals no canister ranges of subnet {Principal(subnet_id)}")
    if not ranges_contain(ranges, canister_id):
        raise CanisterOutsideRanges(f"subnet {Principal(subnet_id)} may not certify for canister {canister_id}")
