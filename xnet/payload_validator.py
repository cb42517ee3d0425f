"""Validation of a proposed block's XNet payload (the spec's ``validate_xnet_payload``; pure).

The outcome is one of three values:

* ``Valid(slices, byte_size)`` — every slice decoded, verified and continues its stream;
* ``Invalid(remote, reason, error)`` — permanent: the payload will never become valid
  (``remote`` is ``None`` for payload-level rules);
* ``Transient(reason)`` — not decidable yet: the referenced state is not committed here, or
  the registry version is not known locally (``public_key_for`` raised
  ``RegistryVersionUnavailable``). The caller retries later.

Rules, in order: payload shape; subnet ids strictly increasing; not our own subnet; total
size within ``limits.max_block_payload_bytes``; the state is available; then per slice (in
payload order) the certified-slice decoder (steps 1–7, at most ``limits.max_slice_bytes``
encoded bytes, signature under the sending subnet's key at ``registry_version``) and
``validate_slice`` against the expected indices, which count the past payloads. A validly
signed but old slice fails on its indices alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from message_routing.limits import Limits
from state_manager.certified_slice import (
    DEFAULT_MAX_EXTRA_POSITIONS, SliceDecodeError, decode_certified_stream_slice,
)
from state_manager.messages import SubnetId
from state_manager.replicated_state import ReplicatedState
from state_manager.streams import ExpectedIndices, StreamSlice

from .errors import (
    InvalidXNetPayload,
    OwnSubnetInPayload,
    RegistryVersionUnavailable,
    XNetPayloadTooLarge,
)
from .expected_indices import expected_indices, reject_signals_begin_for
from .slice_validation import InvalidSlice, SliceExceedsLimits, validate_stream_slice
from .xnet_payload import (
    DecodedXNetPayload,
    XNetPayload,
    check_payload_order,
    check_payload_shape,
    decode_past_payloads,
    decode_xnet_payload,
    xnet_payload_byte_size,
)

__all__ = [
    "Valid", "Invalid", "Transient", "ValidationResult", "validate_xnet_payload", "validate_slice",
    "own_stream_end", "max_witness_extra_positions", "decode_xnet_payload", "PublicKeyLookup",
    "MALFORMED_PAYLOAD", "UNSORTED_SUBNETS", "OWN_SUBNET", "PAYLOAD_TOO_LARGE", "UNDECODABLE_SLICE",
    "INVALID_SLICE", "STATE_UNAVAILABLE", "REGISTRY_VERSION_UNAVAILABLE",
]

# Invalid reasons
MALFORMED_PAYLOAD = "malformed_payload"
UNSORTED_SUBNETS = "unsorted_subnets"
OWN_SUBNET = "own_subnet"
PAYLOAD_TOO_LARGE = "payload_too_large"
UNDECODABLE_SLICE = "undecodable_slice"
INVALID_SLICE = "invalid_slice"
# Transient reasons
STATE_UNAVAILABLE = "state_unavailable"
REGISTRY_VERSION_UNAVAILABLE = "registry_version_unavailable"


@dataclass(frozen=True, slots=True)
class Valid:
    """The decoded slices in payload order, and ``Σ len(certified slice)``."""

    slices: DecodedXNetPayload
    byte_size: int


@dataclass(frozen=True, slots=True)
class Invalid:
    """Permanently invalid: ``remote``'s slice (or the payload, ``remote = None``) broke a rule."""

    remote: Optional[SubnetId]
    reason: str
    error: Exception


@dataclass(frozen=True, slots=True)
class Transient:
    """Not decidable yet; validate again later."""

    reason: str


ValidationResult = Valid | Invalid | Transient

PublicKeyLookup = Callable[[str, int], Optional[bytes]]


def max_witness_extra_positions(limits: Limits) -> int:
    """``max(DEFAULT_MAX_EXTRA_POSITIONS, 2 · limits.max_slice_messages)``: how many positions a
    certified slice's witness may reveal beyond its payload. A pooled slice keeps the witness of
    its first fetch while continuations append messages, so it reveals up to twice the slice
    limit beyond the messages a block takes from it."""
    return max(DEFAULT_MAX_EXTRA_POSITIONS, 2 * limits.max_slice_messages)


def own_stream_end(state: ReplicatedState, remote: SubnetId) -> int:
    """``streams[remote].end``, or 0 when we have never sent to ``remote``."""
    stream = state.streams.get(remote)
    return stream.end if stream is not None else 0


def validate_slice(
    stream_slice: StreamSlice,
    encoded_size: int,
    expected: ExpectedIndices,
    own_end: int,
    limits: Limits,
    *,
    own_reject_signals_begin: int | None = None,
) -> None:
    """The per-slice rules the builder and the validator share. Raise unless

    * ``encoded_size ≤ limits.max_slice_bytes`` (``SliceExceedsLimits``), and
    * ``validate_stream_slice(stream_slice, expected, own_end, limits.max_slice_messages,
      limits.max_slice_bytes, own_reject_signals_begin=…)`` (``InvalidSlice``: no gap, no
      overlap, signals in ``[expected.signal_index, own_end]``, reject signals in order, within
      limits, not empty — a header-only slice whose ``begin`` frees one of our reject signals,
      see ``reject_signals_begin_for``, is not empty).
    """
    if encoded_size > limits.max_slice_bytes:
        raise SliceExceedsLimits(f"{encoded_size} encoded bytes exceed the slice limit of {limits.max_slice_bytes}")
    validate_stream_slice(stream_slice, expected, own_end, limits.max_slice_messages, limits.max_slice_bytes,
                          own_reject_signals_begin=own_reject_signals_begin)


def _payload_rules(payload: object, own_subnet: SubnetId, limits: Limits) -> Invalid | None:
    """Shape, order, own subnet and total size: decidable without state or registry."""
    try:
        check_payload_shape(payload)
    except InvalidXNetPayload as exc:
        return Invalid(None, MALFORMED_PAYLOAD, exc)
    try:
        check_payload_order(payload)
    except InvalidXNetPayload as exc:
        return Invalid(None, UNSORTED_SUBNETS, exc)
    for remote, _ in payload:
        if remote == own_subnet:
            return Invalid(remote, OWN_SUBNET, OwnSubnetInPayload(f"a slice from our own subnet {remote!r}"))
    size = xnet_payload_byte_size(payload)
    if size > limits.max_block_payload_bytes:
        error = XNetPayloadTooLarge(f"{size} bytes exceed the block payload limit of {limits.max_block_payload_bytes}")
        return Invalid(None, PAYLOAD_TOO_LARGE, error)
    return None


def validate_xnet_payload(
    payload: XNetPayload,
    own_subnet: SubnetId,
    state: ReplicatedState | None,
    past_payloads: Sequence[XNetPayload],
    public_key_for: PublicKeyLookup,
    registry_version: int,
    limits: Limits,
) -> ValidationResult:
    """``validate_xnet_payload`` (module docstring). A slice whose key lookup is transient is
    skipped while the others are still checked: any permanent error wins over ``Transient``.
    Past payloads that do not decode raise ``CorruptPastPayload`` (a local fault)."""
    invalid = _payload_rules(payload, own_subnet, limits)
    if invalid is not None:
        return invalid
    if state is None:
        return Transient(STATE_UNAVAILABLE)
    remotes = [remote for remote, _ in payload]
    decoded_past = decode_past_payloads(past_payloads)
    expected = expected_indices(state, remotes, decoded_past)
    decoded: list[tuple[SubnetId, StreamSlice]] = []
    transient: Transient | None = None
    for remote, data in payload:
        try:
            certified = decode_certified_stream_slice(
                own_subnet, remote, public_key_for, registry_version, data, max_bytes=limits.max_slice_bytes,
                max_extra_positions=max_witness_extra_positions(limits))
        except RegistryVersionUnavailable:
            transient = Transient(REGISTRY_VERSION_UNAVAILABLE)
            continue
        except SliceDecodeError as exc:
            return Invalid(remote, UNDECODABLE_SLICE, exc)
        try:
            validate_slice(certified.stream_slice, len(data), expected[remote], own_stream_end(state, remote), limits,
                           own_reject_signals_begin=reject_signals_begin_for(state, remote, decoded_past))
        except InvalidSlice as exc:
            return Invalid(remote, INVALID_SLICE, exc)
        decoded.append((remote, certified.stream_slice))
    if transient is not None:
        return transient
    return Valid(tuple(decoded), xnet_payload_byte_size(payload))
