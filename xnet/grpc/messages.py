"""Wire bodies of the XNet service: canonical msgpack arrays whose first item is a version.

``GetStreamSlice``  request ``[1, subnet, witness_begin, msg_begin, msg_limit, byte_limit]``,
                    response ``[1, certified_slice_bytes]`` (opaque here; decoded and verified
                    by ``state_manager`` on the receiving side).
``ListStreams``     request ``[1]``, response ``[1, [subnet, ...]]`` (strictly increasing).

Decoders read bytes from other nodes, so they are total: any input either decodes or raises
``BadRequest`` (server side) or ``MalformedResponse`` / ``ResponseTooLarge`` (client side).
Nothing here does I/O; it lives next to the transport because only the transport uses it
(the request type itself is ``xnet.slice_request``'s: the pure fetcher makes requests too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from state_manager.encoding import EncodingError, decode, encode
from xnet.errors import BadRequest, MalformedResponse, ResponseTooLarge
from xnet.slice_request import GetStreamSliceRequest   # the pure request type, encoded here

__all__ = [
    "SERVICE_NAME", "GET_STREAM_SLICE_METHOD", "LIST_STREAMS_METHOD",
    "WIRE_VERSION", "MAX_SUBNET_ID_CHARS", "MAX_REQUEST_BYTES", "MAX_LISTED_STREAMS",
    "DEFAULT_MAX_MSG_LIMIT", "DEFAULT_MAX_BYTE_LIMIT", "RESPONSE_ENVELOPE_BYTES",
    "GetStreamSliceRequest", "RequestLimits", "check_request",
    "encode_get_stream_slice_request", "decode_get_stream_slice_request",
    "encode_get_stream_slice_response", "decode_get_stream_slice_response",
    "encode_list_streams_request", "decode_list_streams_request",
    "encode_list_streams_response", "decode_list_streams_response",
]

SERVICE_NAME = "xnet.XNet"
GET_STREAM_SLICE_METHOD = f"/{SERVICE_NAME}/GetStreamSlice"
LIST_STREAMS_METHOD = f"/{SERVICE_NAME}/ListStreams"
WIRE_VERSION = 1
MAX_SUBNET_ID_CHARS = 64
#: A request is a handful of integers and one short name; anything bigger is not a request.
MAX_REQUEST_BYTES = 1024
MAX_LISTED_STREAMS = 10_000
DEFAULT_MAX_MSG_LIMIT = 10_000
DEFAULT_MAX_BYTE_LIMIT = 4 * 1024 * 1024
#: Upper bound on what ``[1, bin]`` adds around the slice bytes (fixarray + version + bin32 header).
RESPONSE_ENVELOPE_BYTES = 8
_U64 = 2**64


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """The largest ``msg_limit`` and ``byte_limit`` a server accepts."""

    max_msg_limit: int = DEFAULT_MAX_MSG_LIMIT
    max_byte_limit: int = DEFAULT_MAX_BYTE_LIMIT


_NO_LIMITS = RequestLimits(_U64 - 1, _U64 - 1)


def _check_u64(value: Any, what: str) -> int:
    # ``type(...) is int`` so that True/False never pass as 1/0.
    if type(value) is not int or not 0 <= value < _U64:
        raise BadRequest(f"{what}: expected u64, got {value!r}")
    return value


def _is_subnet_name(value: Any) -> bool:
    # Printable also excludes lone surrogates, which have no UTF-8 (so no msgpack) encoding.
    return isinstance(value, str) and 0 < len(value) <= MAX_SUBNET_ID_CHARS and value.isprintable()


def check_request(
    request: GetStreamSliceRequest, limits: RequestLimits = _NO_LIMITS
) -> GetStreamSliceRequest:
    """Raise ``BadRequest`` unless every field is in range:

    * ``subnet`` is 1..64 printable characters
    * all integers are u64, ``witness_begin ≤ msg_begin``
    * ``0 < msg_limit ≤ limits.max_msg_limit`` and ``0 < byte_limit ≤ limits.max_byte_limit``
    """
    if not isinstance(request, GetStreamSliceRequest):
        raise BadRequest(f"expected a GetStreamSliceRequest, got {type(request).__name__}")
    if not _is_subnet_name(request.subnet):
        raise BadRequest(f"subnet: expected 1..{MAX_SUBNET_ID_CHARS} printable characters")
    witness_begin = _check_u64(request.witness_begin, "witness_begin")
    msg_begin = _check_u64(request.msg_begin, "msg_begin")
    msg_limit = _check_u64(request.msg_limit, "msg_limit")
    byte_limit = _check_u64(request.byte_limit, "byte_limit")
    if witness_begin > msg_begin:
        raise BadRequest(f"witness_begin {witness_begin} is after msg_begin {msg_begin}")
    if not 0 < msg_limit <= limits.max_msg_limit:
        raise BadRequest(f"msg_limit {msg_limit} not in 1..{limits.max_msg_limit}")
    if not 0 < byte_limit <= limits.max_byte_limit:
        raise BadRequest(f"byte_limit {byte_limit} not in 1..{limits.max_byte_limit}")
    return request


def _decode_versioned(data: bytes, max_bytes: int, error: type[Exception], what: str) -> tuple:
    """Strict-decode ``data`` into an array whose first item is ``WIRE_VERSION``."""
    try:
        value = decode(data, max_bytes=max_bytes)
    except EncodingError as exc:
        raise error(f"{what}: {exc}") from exc
    if not isinstance(value, tuple) or not value:
        raise error(f"{what}: expected a non-empty array")
    if type(value[0]) is not int or value[0] != WIRE_VERSION:
        raise error(f"{what}: unknown version {value[0]!r}")
    return value


def encode_get_stream_slice_request(request: GetStreamSliceRequest) -> bytes:
    """Canonical bytes of a checked request (raises ``BadRequest`` for out-of-range fields)."""
    r = check_request(request)
    return encode([WIRE_VERSION, r.subnet, r.witness_begin, r.msg_begin, r.msg_limit, r.byte_limit])


def decode_get_stream_slice_request(
    data: bytes, limits: RequestLimits = RequestLimits()
) -> GetStreamSliceRequest:
    """Parse and check a request against the server's ``limits``; raise ``BadRequest``."""
    value = _decode_versioned(data, MAX_REQUEST_BYTES, BadRequest, "GetStreamSlice request")
    if len(value) != 6:
        raise BadRequest(f"GetStreamSlice request: expected 6 items, got {len(value)}")
    return check_request(GetStreamSliceRequest(*value[1:]), limits)


def encode_get_stream_slice_response(slice_bytes: bytes) -> bytes:
    """``[1, slice_bytes]``."""
    if not isinstance(slice_bytes, bytes):
        raise TypeError(f"slice must be bytes, got {type(slice_bytes).__name__}")
    return encode([WIRE_VERSION, slice_bytes])


def decode_get_stream_slice_response(data: bytes, max_slice_bytes: int) -> bytes:
    """The certified slice bytes of a response; ``ResponseTooLarge`` beyond ``max_slice_bytes``,
    ``MalformedResponse`` for anything that is not ``[1, bin]``."""
    if not isinstance(data, bytes):
        raise MalformedResponse(f"expected bytes, got {type(data).__name__}")
    if len(data) > max_slice_bytes + RESPONSE_ENVELOPE_BYTES:
        raise ResponseTooLarge(f"{len(data)} byte response exceeds the cap of {max_slice_bytes}")
    value = _decode_versioned(data, max_slice_bytes + RESPONSE_ENVELOPE_BYTES, MalformedResponse,
                              "GetStreamSlice response")
    if len(value) != 2 or not isinstance(value[1], bytes):
        raise MalformedResponse("GetStreamSlice response: expected [version, bytes]")
    if len(value[1]) > max_slice_bytes:
        raise ResponseTooLarge(f"{len(value[1])} byte slice exceeds the cap of {max_slice_bytes}")
    return value[1]


def encode_list_streams_request() -> bytes:
    """``[1]``."""
    return encode([WIRE_VERSION])


def decode_list_streams_request(data: bytes) -> None:
    """Check that ``data`` is ``[1]``; raise ``BadRequest`` otherwise."""
    value = _decode_versioned(data, MAX_REQUEST_BYTES, BadRequest, "ListStreams request")
    if len(value) != 1:
        raise BadRequest(f"ListStreams request: expected 1 item, got {len(value)}")


def encode_list_streams_response(subnets: Iterable[str]) -> bytes:
    """``[1, sorted unique subnets]``; ``ValueError`` for a name that is not 1..64 printable characters."""
    names = list(subnets)
    for name in names:
        if not _is_subnet_name(name):
            raise ValueError(f"not a subnet name: {name!r}")
    names = sorted(set(names))
    if len(names) > MAX_LISTED_STREAMS:
        raise ValueError(f"{len(names)} streams exceed the limit of {MAX_LISTED_STREAMS}")
    return encode([WIRE_VERSION, names])


def decode_list_streams_response(data: bytes, max_bytes: int) -> list[str]:
    """The listed subnets (strictly increasing, each 1..64 printable characters); ``MalformedResponse``."""
    if not isinstance(data, bytes):
        raise MalformedResponse(f"expected bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise ResponseTooLarge(f"{len(data)} byte response exceeds the cap of {max_bytes}")
    value = _decode_versioned(data, max_bytes, MalformedResponse, "ListStreams response")
    if len(value) != 2 or not isinstance(value[1], tuple) or len(value[1]) > MAX_LISTED_STREAMS:
        raise MalformedResponse("ListStreams response: expected [version, [subnet, ...]]")
    names = value[1]
    for i, name in enumerate(names):
        if not _is_subnet_name(name):
            raise MalformedResponse(f"ListStreams response: item {i} is not a subnet name")
        if i and not names[i - 1] < name:
            raise MalformedResponse("ListStreams response: subnets not strictly increasing")
    return list(names)
