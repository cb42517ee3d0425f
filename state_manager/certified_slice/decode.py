"""Decoding and verifying a certified stream slice (the receiving subnet's side;
docs/architecture.md, *Certified stream slices*).

Checks, in this order, each failure with its own ``SliceDecodeError`` subclass:

1. bounded total size, then the outer array (canonical, version 1, four fields, no trailing
   bytes) — before any tree is parsed;
2. the payload (``bounded_parse``): while parsing, every node is a fork, labeled node or
   leaf and the payload fits its witness (``PayloadExceedsWitness``); then it holds exactly
   one ``/streams/<dst>`` with ``"header"`` and optional ``"messages"``, labels increasing in
   every fork group, within the depth bound, canonical; ``dst == own_subnet``;
3. the witness (``bounded_parse``): while parsing, at most the nodes, positions and pruned
   nodes of ``witness_budget`` for this payload (``WitnessOverBudget``); then every fork
   group is well-formed within the depth bound, it is canonical, every payload leaf position
   is ``Labeled(l, Pruned(d))`` in it with ``d == hash_leaf(value)``, and it has no ``Leaf``;
4. ``reconstruct(witness) == certification.root`` (computed while parsing), and the witness
   reveals ``/metadata/height`` as ``height_leaf(certification.height)``
   (``CertificationHeightMissing`` if it does not reveal it, ``CertificationHeightMismatch``
   for another height: a relabeled one). The signature covers the root only, so this is what
   authenticates the height (docs/architecture.md, *Certifications*);
5. the certification verifies under the sending subnet's key at the registry version;
6. the header decodes and its bounds are sane;
7. messages have consecutive 8-byte indices inside ``[header.begin, header.end)`` and decode.

Pure: the certification and the public key lookup arrive as arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import msgpack

from state_manager import certification as cm
from state_manager import encoding
from state_manager.codec import CodecError, decode_header_leaf, decode_message_leaf
from state_manager.hash_tree import domain_sep, hash_leaf
from state_manager.sha256 import sha256_of
from state_manager.streams import StreamHeader, StreamSlice
from state_manager.tree_encoding import TAG_LEAF, TAG_NAMES, TAG_PRUNED

from .bounded_parse import ParsedWitness, PayloadParts, parse_payload, parse_witness, witness_budget
from .errors import (
    SIGNATURE_ERRORS,
    CertificationHeightMismatch,
    CertificationHeightMissing,
    EmptyCertificationSignature,
    InvalidDecodeLimits,
    InvalidHeaderBounds,
    InvalidRejectSignals,
    MalformedHeader,
    MalformedMessage,
    MalformedMessageIndex,
    MalformedSlice,
    MalformedSliceCertification,
    MessageOutsideHeaderRange,
    NonCanonicalSlice,
    NonConsecutiveMessages,
    PositionSuppliedTwice,
    PrunedDigestMismatch,
    RootMismatch,
    SliceFieldCount,
    SliceForAnotherSubnet,
    SliceTooLarge,
    SliceTrailingBytes,
    UnknownSubnetKey,
    UnsupportedSliceVersion,
    WitnessContainsLeaf,
    WitnessMismatch,
)
from .layout import (
    DEFAULT_MAX_EXTRA_POSITIONS,
    DEFAULT_MAX_SLICE_BYTES,
    DEFAULT_MAX_TREE_DEPTH,
    INDEX_BYTES,
    SLICE_VERSION,
    CertifiedSlice,
    height_leaf,
    message_label,
)

__all__ = [
    "validate_limits",
    "split_envelope",
    "decode_header",
    "decode_certified_stream_slice",
    "decode_valid_certified_stream_slice",
    "certified_slice_byte_size",
]

_LEAF_SEP = domain_sep("ic-hashtree-leaf")
_CERTIFICATION_PROBE_BYTES = 1024  # an encoded certification is ~140 bytes


def validate_limits(max_bytes: object, max_depth: object, max_extra_positions: object) -> None:
    if type(max_bytes) is not int or max_bytes < 1:
        raise InvalidDecodeLimits(f"max_bytes must be a positive integer, got {max_bytes!r}")
    if type(max_depth) is not int or max_depth < 1:
        raise InvalidDecodeLimits(f"max_depth must be a positive integer, got {max_depth!r}")
    if type(max_extra_positions) is not int or max_extra_positions < 0:
        raise InvalidDecodeLimits(f"max_extra_positions must be a non-negative integer, got {max_extra_positions!r}")


class _EnvelopeReader:
    """msgpack's ``Unpacker`` over the outer array, one item at a time, each item checked to
    be in its canonical (shortest) form as soon as it is read."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.unpacker = msgpack.Unpacker(use_list=False, raw=False, max_buffer_size=max(len(data), 1), max_map_len=0,
                                         max_str_len=0, max_ext_len=0)
        self.unpacker.feed(data)

    def _read(self, read, what: str):
        start = self.unpacker.tell()
        try:
            value = read()
        except (msgpack.OutOfData, ValueError) as exc:
            raise MalformedSlice(f"{what} at offset {start}: {exc}") from exc
        return start, value

    def array_header(self) -> int:
        start, count = self._read(self.unpacker.read_array_header, "a certified slice is an array")
        if self.data[start:self.unpacker.tell()] != msgpack.Packer().pack_array_header(count):
            raise NonCanonicalSlice(f"array of {count} items is not in its shortest form")
        return count

    def value(self, what: str) -> object:
        start, value = self._read(self.unpacker.unpack, what)
        if type(value) is int and self.data[start:self.unpacker.tell()] != encoding.packb(value):
            raise NonCanonicalSlice(f"integer {value} at offset {start} is not in its shortest form")
        return value

    def bin(self, what: str) -> bytes:
        start, value = self._read(self.unpacker.unpack, what)
        if type(value) is not bytes:
            raise MalformedSlice(f"{what} at offset {start} must be bin, got {type(value).__name__}")
        length = len(value)
        # bin8, bin16 and bin32 headers take 2, 3 and 5 bytes; the shortest that fits is canonical.
        if self.unpacker.tell() - length - start != (2 if length < 0x100 else 3 if length < 0x10000 else 5):
            raise NonCanonicalSlice(f"{what} of {length} bytes uses a longer bin header")
        return value

    @property
    def trailing(self) -> int:
        return len(self.data) - self.unpacker.tell()


def split_envelope(data: object, max_bytes: int) -> tuple[bytes, bytes, bytes]:
    """Step 1 (outer): ``len(data) <= max_bytes``; the input is exactly one canonical array
    ``[1, payload: bin, witness: bin, certification: bin]``.

    The version is read before the field count, so a future version may change the arity."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MalformedSlice(f"expected bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise SliceTooLarge(f"{len(data)} bytes exceed the limit of {max_bytes}")
    reader = _EnvelopeReader(bytes(data))
    count = reader.array_header()
    if count == 0:
        raise MalformedSlice("empty array has no version")
    version = reader.value("the version")
    if type(version) is not int:
        raise MalformedSlice(f"the version is not an integer, got {type(version).__name__}")
    if version == 1:
        raise UnsupportedSliceVersion(
            f"certified slice version 1 carries a certification of the project's own BLS variant and may leave "
            f"/metadata/height unrevealed; it is no longer accepted (expected version {SLICE_VERSION})")
    if version != SLICE_VERSION:
        raise UnsupportedSliceVersion(f"unknown certified slice version {version}")
    if count != 4:
        raise SliceFieldCount(f"certified slice has {count} fields, expected 4")
    payload_bytes = reader.bin("payload")
    witness_bytes = reader.bin("witness")
    certification_bytes = reader.bin("certification")
    if reader.trailing:
        raise SliceTrailingBytes(f"{reader.trailing} bytes follow the certified slice")
    return payload_bytes, witness_bytes, certification_bytes


def _check_position(witness_node: Optional[tuple], value: bytes, where: str) -> None:
    """A payload leaf position: the witness must hold ``Pruned(hash_leaf(value))`` there."""
    if witness_node is None:
        raise WitnessMismatch(f"the witness does not reveal {where}")
    tag = witness_node[0]
    if tag == TAG_LEAF:
        raise PositionSuppliedTwice(f"both the payload and the witness supply {where}")
    if tag != TAG_PRUNED:
        raise WitnessMismatch(f"the witness holds a {TAG_NAMES[tag]} node at {where}, expected a pruned leaf")
    if witness_node[1] != sha256_of(_LEAF_SEP, value):
        raise PrunedDigestMismatch(f"the witness digest at {where} is not the digest of the payload value")


def _check_witness_against_payload(witness: ParsedWitness, parts: PayloadParts) -> None:
    """Step 3 (merge): every payload leaf position is ``Labeled(l, Pruned(hash_leaf(v)))`` in
    the witness; then the witness carries no leaf data at all."""
    where = f"/streams/{parts.dst}"
    _check_position(witness.header, parts.header_leaf, f"{where}/header")
    if parts.messages and witness.messages is None:
        raise WitnessMismatch(f"the witness does not reveal {where}/messages")
    revealed = witness.revealed
    for label, value in parts.messages:
        _check_position(revealed.get(label), value, f"message {label.hex()}")
    if witness.has_leaf:
        raise WitnessContainsLeaf("the witness carries leaf data")


def _check_certified_height(witness: ParsedWitness, certification: cm.Certification) -> None:
    """Step 4 (height): the witness reveals ``/metadata/height`` and it states
    ``certification.height``: the certified tree was built at that height."""
    node = witness.height
    if node is None or node[0] != TAG_PRUNED:
        raise CertificationHeightMissing(
            f"the witness does not reveal /metadata/height, so the claimed height {certification.height} is unproven")
    if node[1] != hash_leaf(height_leaf(certification.height)):
        raise CertificationHeightMismatch(
            f"the certification claims height {certification.height}, the certified tree's /metadata/height differs "
            f"(a relabeled height)")


def _decode_certification(data: bytes) -> cm.Certification:
    """Step 4 (certification bytes). A canonical certification whose signature is the empty
    byte string is an uncertified state: ``EmptyCertificationSignature``, like an all-zero one."""
    try:
        return cm.decode_certification(data)
    except cm.MalformedCertification as exc:
        if _has_empty_signature(data):
            raise EmptyCertificationSignature("the certification signature is empty") from exc
        raise MalformedSliceCertification(str(exc)) from exc


def _has_empty_signature(data: bytes) -> bool:
    try:
        value = encoding.decode(data, max_bytes=_CERTIFICATION_PROBE_BYTES)
    except encoding.EncodingError:
        return False
    return (
        isinstance(value, tuple)
        and len(value) == 4
        and type(value[0]) is int
        and value[0] == cm.CERTIFICATION_VERSION
        and value[3] == b""
    )


def decode_header(header_leaf: bytes) -> StreamHeader:
    """Step 6: the header leaf decodes; ``begin <= end``; reject signal indices strictly
    increase and stay below ``signals_end``."""
    try:
        header = decode_header_leaf(header_leaf)
    except CodecError as exc:
        raise MalformedHeader(str(exc)) from exc
    if header.begin > header.end:
        raise InvalidHeaderBounds(f"header begin {header.begin} is above end {header.end}")
    previous = -1
    for signal in header.reject_signals:
        if signal.index <= previous:
            raise InvalidRejectSignals(f"reject signal {signal.index} does not follow {previous}")
        if signal.index >= header.signals_end:
            raise InvalidRejectSignals(f"reject signal {signal.index} is not below signals_end {header.signals_end}")
        previous = signal.index
    return header


def _decode_messages(header: StreamHeader, messages: tuple[tuple[bytes, bytes], ...]) -> StreamSlice:
    """Step 7: labels are 8-byte indices ``i0, i0 + 1, ...`` inside ``[header.begin,
    header.end)`` and every leaf decodes. A header-only slice begins at ``header.end``."""
    if not messages:
        return StreamSlice(header, header.end, ())
    decoded = []
    first = None
    expected = 0
    for label, value in messages:
        if len(label) != INDEX_BYTES:
            raise MalformedMessageIndex(f"message label {label.hex()} is not {INDEX_BYTES} bytes")
        index = int.from_bytes(label, "big")
        if first is None:
            first = index
        elif index != expected:
            raise NonConsecutiveMessages(f"message {index} follows message {expected - 1}")
        if not header.begin <= index < header.end:
            raise MessageOutsideHeaderRange(f"message {index} outside [{header.begin}, {header.end})")
        try:
            decoded.append(decode_message_leaf(value))
        except CodecError as exc:
            raise MalformedMessage(f"message {index}: {exc}") from exc
        expected = index + 1
    return StreamSlice(header, first, tuple(decoded))


def _witness_range(stream_slice: StreamSlice, revealed: dict[bytes, tuple]) -> tuple[int, int]:
    """``[witness_begin, witness_end)``: the longest run of revealed message positions inside
    the header range that ends at ``messages_end`` (header-only: one past the highest revealed
    position, or the empty range at ``messages_begin`` when none is revealed)."""
    header = stream_slice.header
    if stream_slice.messages:
        begin, end = stream_slice.messages_begin, stream_slice.messages_end
    else:
        inside = [
            index
            for index in (int.from_bytes(label, "big") for label in revealed if len(label) == INDEX_BYTES)
            if header.begin <= index < header.end
        ]
        if not inside:
            return stream_slice.messages_begin, stream_slice.messages_begin
        end = max(inside) + 1
        begin = end - 1
    while begin > header.begin and message_label(begin - 1) in revealed:
        begin -= 1
    return begin, end


def decode_certified_stream_slice(
    own_subnet: str,
    remote_subnet: str,
    public_key_for: Callable[[str, int], Optional[bytes]],
    registry_version: int,
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_SLICE_BYTES,
    max_depth: int = DEFAULT_MAX_TREE_DEPTH,
    max_extra_positions: int = DEFAULT_MAX_EXTRA_POSITIONS,
) -> CertifiedSlice:
    """Decode and verify a slice that ``remote_subnet`` sent to ``own_subnet``.

    Checks in the order of the module docstring (steps 1–7); the first failure raises its
    own ``SliceDecodeError`` subclass and no slice is returned. The signature is checked
    with ``public_key_for(remote_subnet, registry_version)`` (``None``: ``UnknownSubnetKey``).
    The witness may reveal at most ``max_extra_positions`` message positions beyond the
    payload's messages (``witness_budget``).
    """
    validate_limits(max_bytes, max_depth, max_extra_positions)
    # 1. bounds, outer array
    payload_bytes, witness_bytes, certification_bytes = split_envelope(data, max_bytes)
    # 2. payload
    parts = parse_payload(payload_bytes, len(witness_bytes), max_depth)
    if parts.dst != own_subnet:
        raise SliceForAnotherSubnet(f"slice addressed to {parts.dst!r}, this is {own_subnet!r}")
    # 3. witness, within what a slice with this payload can need
    budget = witness_budget(len(parts.messages), max_extra_positions, max_depth)
    witness = parse_witness(witness_bytes, parts.dst.encode("utf-8"), budget, max_depth)
    _check_witness_against_payload(witness, parts)
    # 4. root and height
    certification = _decode_certification(certification_bytes)
    if witness.root != certification.root:
        raise RootMismatch("the witness does not reconstruct to the certified root")
    _check_certified_height(witness, certification)
    # 5. signature
    public_key = public_key_for(remote_subnet, registry_version)
    if public_key is None:
        raise UnknownSubnetKey(f"no public key for subnet {remote_subnet!r} at registry version {registry_version}")
    cm.verify_certification(certification, public_key, SIGNATURE_ERRORS)
    # 6. header
    header = decode_header(parts.header_leaf)
    # 7. messages
    stream_slice = _decode_messages(header, parts.messages)
    witness_begin, witness_end = _witness_range(stream_slice, witness.revealed)
    return CertifiedSlice(stream_slice, certification, witness_begin, witness_end)


def decode_valid_certified_stream_slice(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_SLICE_BYTES,
    max_depth: int = DEFAULT_MAX_TREE_DEPTH,
) -> StreamSlice:
    """The ``StreamSlice`` of a slice already validated (e.g. agreed in a block): steps 1, 2
    (without the destination check), 6 and 7 only. The witness and the certification are
    not decoded, so this is cheap; garbage still raises a ``SliceDecodeError`` subclass."""
    validate_limits(max_bytes, max_depth, 0)
    payload_bytes, witness_bytes, _ = split_envelope(data, max_bytes)
    parts = parse_payload(payload_bytes, len(witness_bytes), max_depth)
    header = decode_header(parts.header_leaf)
    return _decode_messages(header, parts.messages)




def certified_slice_byte_size(data: bytes) -> int:
    """The encoded size of a certified slice: ``len(data)`` (what block byte budgets count)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MalformedSlice(f"expected bytes, got {type(data).__name__}")
    return len(data)
