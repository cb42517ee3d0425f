"""A batch: what consensus agreed the subnet processes at one height, and its encoding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from state_manager.codec import (
    CodecError, check_bytes, check_str, check_tuple, check_u64, header_from_value, header_to_value,
    ingress_from_value, ingress_to_value, message_from_value, message_to_value,
)
from state_manager.encoding import EncodingError, decode, encode_unchecked
from state_manager.messages import Ingress, SubnetId
from state_manager.streams import StreamSlice

from .errors import MessageRoutingError

__all__ = ["Batch", "BatchError", "BATCH_ENCODING_VERSION", "BOUNDED_WAIT_BATCH_ENCODING_VERSION",
           "batch_uses_deadlines", "encode_batch", "decode_batch", "batch_to_value", "batch_from_value",
           "slice_to_value", "slice_from_value"]

BATCH_ENCODING_VERSION = 1
#: The version of batches whose slices carry a message with a deadline (bounded-wait calls).
#: A batch is written at the lowest version that can express it, so batches without such
#: messages keep their version-1 bytes and each batch has exactly one encoding.
BOUNDED_WAIT_BATCH_ENCODING_VERSION = 2


def batch_uses_deadlines(batch: "Batch") -> bool:
    """Some message in the batch's XNet payload has a deadline."""
    return any(message.deadline for _, stream_slice in batch.xnet_payload for message in stream_slice.messages)


class BatchError(MessageRoutingError):
    """A batch whose XNet payload is not sorted by subnet with at most one slice each."""


@dataclass(frozen=True, slots=True)
class Batch:
    """``Batch{batch_number, time, registry_version, randomness, ingress, xnet_payload}``.

    ``xnet_payload`` holds at most one (already validated and decoded) slice per peer subnet,
    as ``(subnet, slice)`` pairs sorted by subnet id.
    """

    batch_number: int
    time: int
    registry_version: int
    randomness: bytes = bytes(32)
    ingress: tuple[Ingress, ...] = ()
    xnet_payload: tuple[tuple[SubnetId, StreamSlice], ...] = ()

    def __post_init__(self) -> None:
        subnets = [subnet for subnet, _ in self.xnet_payload]
        if subnets != sorted(set(subnets)):
            raise BatchError("xnet_payload must hold at most one slice per subnet, sorted by subnet id")


def slice_to_value(stream_slice: StreamSlice) -> tuple:
    return (header_to_value(stream_slice.header), stream_slice.messages_begin,
            tuple(message_to_value(m) for m in stream_slice.messages))


def slice_from_value(value: Any) -> StreamSlice:
    header, begin, messages = check_tuple(value, "stream slice", 3)
    return StreamSlice(header_from_value(header), check_u64(begin, "messages begin"),
                       tuple(message_from_value(m) for m in check_tuple(messages, "slice messages")))


def batch_to_value(batch: Batch) -> tuple:
    version = BOUNDED_WAIT_BATCH_ENCODING_VERSION if batch_uses_deadlines(batch) else BATCH_ENCODING_VERSION
    return (version, batch.batch_number, batch.time, batch.registry_version, batch.randomness,
            tuple(ingress_to_value(i) for i in batch.ingress),
            tuple((s, slice_to_value(x)) for s, x in batch.xnet_payload))


def batch_from_value(value: Any) -> Batch:
    version, number, time, registry_version, randomness, ingress, payload = check_tuple(value, "batch", 7)
    if type(version) is not int or version not in (BATCH_ENCODING_VERSION, BOUNDED_WAIT_BATCH_ENCODING_VERSION):
        raise CodecError(f"batch: unknown encoding version {version!r}")
    try:
        batch = Batch(
            check_u64(number, "batch number"), check_u64(time, "batch time"),
            check_u64(registry_version, "registry version"), check_bytes(randomness, "randomness", 32),
            tuple(ingress_from_value(i) for i in check_tuple(ingress, "ingress")),
            tuple((check_str(s, "subnet"), slice_from_value(x))
                  for s, x in (check_tuple(e, "payload entry", 2) for e in check_tuple(payload, "xnet payload"))),
        )
    except BatchError as exc:
        raise CodecError(str(exc)) from exc
    if batch_uses_deadlines(batch) != (version == BOUNDED_WAIT_BATCH_ENCODING_VERSION):
        raise CodecError(f"batch: version {version} does not match whether its messages carry deadlines")
    return batch


def encode_batch(batch: Batch) -> bytes:
    return encode_unchecked(batch_to_value(batch))


def decode_batch(data: bytes) -> Batch:
    try:
        return batch_from_value(decode(data))
    except EncodingError as exc:
        raise CodecError(f"batch: {exc}") from exc
