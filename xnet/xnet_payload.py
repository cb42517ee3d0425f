"""The XNet part of a block: at most one certified stream slice per peer subnet (pure).

``XNetPayload = ((subnet id, certified slice bytes), ...)``, strictly increasing subnet ids.
Agreed payloads are decoded without re-verification (``decode_valid_certified_stream_slice``):
they were validated before they were agreed. Decoded, a payload is ``DecodedXNetPayload =
((subnet id, StreamSlice), ...)`` in payload order (what a batch carries), or
``SlicesBySubnet = {subnet id: StreamSlice}`` to look its slices up (past payloads).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from state_manager.certified_slice import SliceDecodeError, decode_valid_certified_stream_slice
from state_manager.messages import SubnetId
from state_manager.streams import StreamSlice

from .errors import CorruptPastPayload, MalformedXNetPayload, UnsortedXNetPayload

__all__ = [
    "XNetPayload", "DecodedXNetPayload", "SlicesBySubnet", "check_payload_shape", "check_payload_order",
    "xnet_payload_byte_size", "decode_xnet_payload", "decode_past_payloads",
]

XNetPayload = tuple[tuple[SubnetId, bytes], ...]
DecodedXNetPayload = tuple[tuple[SubnetId, StreamSlice], ...]
SlicesBySubnet = Mapping[SubnetId, StreamSlice]


def check_payload_shape(payload: object) -> None:
    """Raise ``MalformedXNetPayload`` unless ``payload`` is a tuple of ``(str, bytes)`` pairs."""
    if type(payload) is not tuple:
        raise MalformedXNetPayload(f"an XNet payload is a tuple, got {type(payload).__name__}")
    for entry in payload:
        if type(entry) is not tuple or len(entry) != 2:
            raise MalformedXNetPayload("every XNet payload entry is a (subnet, slice) pair")
        if type(entry[0]) is not str or type(entry[1]) is not bytes:
            raise MalformedXNetPayload("an XNet payload entry is (str subnet id, bytes certified slice)")


def check_payload_order(payload: XNetPayload) -> None:
    """Raise ``UnsortedXNetPayload`` unless ``subnet_0 < subnet_1 < ...`` (sorted, no repeats)."""
    for (previous, _), (subnet, _) in zip(payload, payload[1:]):
        if not previous < subnet:
            raise UnsortedXNetPayload(f"subnet {subnet!r} follows {previous!r}: not strictly increasing")


def xnet_payload_byte_size(payload: XNetPayload) -> int:
    """``Σ len(certified slice)`` over the payload (what the block byte budget counts)."""
    return sum(len(data) for _, data in payload)


def decode_xnet_payload(payload: XNetPayload) -> DecodedXNetPayload:
    """``((subnet, decode_valid_certified_stream_slice(slice)), ...)`` for an agreed payload:
    what the batch carries after agreement. Raises ``SliceDecodeError`` on garbage."""
    check_payload_shape(payload)
    return tuple((subnet, decode_valid_certified_stream_slice(data)) for subnet, data in payload)


def decode_past_payloads(past_payloads: Iterable[XNetPayload]) -> list[SlicesBySubnet]:
    """Each agreed, not yet executed payload as ``{subnet: StreamSlice}``, oldest first.
    Raises ``CorruptPastPayload`` if one does not decode (they were validated when agreed)."""
    decoded: list[SlicesBySubnet] = []
    for payload in past_payloads:
        try:
            decoded.append(dict(decode_xnet_payload(payload)))
        except (SliceDecodeError, MalformedXNetPayload) as exc:
            raise CorruptPastPayload(f"an agreed XNet payload does not decode: {exc}") from exc
    return decoded
