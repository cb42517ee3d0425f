"""Injected faults: corrupt one replica's copy of one batch, to test that the audit finds it.

Messages of a batch are addressed by one index: ingress messages first (block order), then
the messages of each XNet slice (slices in subnet order, messages in index order).

* ``flip``  XOR the low bit of the last byte of the message's payload (ingress / request
  argument, reply data or reject text; the method name if the payload is empty);
* ``drop``  remove the message from its ingress list or slice;
* ``swap``  exchange two messages of the same ingress list or slice.

Everything here is pure: a new ``Batch`` is returned, the original is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Union

from message_routing.batch import Batch
from state_manager.messages import Ingress, Reject, Reply, Request, Response
from state_manager.streams import StreamSlice

from .errors import FaultError
from .perturbation import Fault

__all__ = ["MessageRef", "batch_messages", "apply_fault", "destination_of", "flip_message"]

AnyMessage = Union[Ingress, Request, Response]
INGRESS = "ingress"


@dataclass(frozen=True, slots=True)
class MessageRef:
    """Message ``position`` of ``container`` (``"ingress"`` or the sending subnet's id)."""

    index: int
    container: str
    position: int
    message: AnyMessage


def batch_messages(batch: Batch) -> tuple[MessageRef, ...]:
    """Every message of ``batch`` with its fault index (module docstring)."""
    refs: list[MessageRef] = []
    for position, ingress in enumerate(batch.ingress):
        refs.append(MessageRef(len(refs), INGRESS, position, ingress))
    for subnet, stream_slice in batch.xnet_payload:
        for position, message in enumerate(stream_slice.messages):
            refs.append(MessageRef(len(refs), subnet, position, message))
    return tuple(refs)


def destination_of(message: AnyMessage) -> int:
    """The canister whose state the message goes to (receiver, or a response's originator)."""
    if type(message) is Response:
        return message.originator
    return message.receiver


def _flip_last(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0x01])


def _flip_text(text: str) -> str:
    """Flip the low bit of the last character (stays valid text)."""
    return text[:-1] + chr(ord(text[-1]) ^ 0x01)


def flip_message(message: AnyMessage) -> AnyMessage:
    """The message with one payload bit flipped (see the module docstring)."""
    kind = type(message)
    if kind is Ingress or kind is Request:
        if message.method_payload:
            return replace(message, method_payload=_flip_last(message.method_payload))
        if message.method_name:
            return replace(message, method_name=_flip_text(message.method_name))
    elif kind is Response:
        payload = message.response_payload
        if type(payload) is Reply and payload.data:
            return replace(message, response_payload=Reply(_flip_last(payload.data)))
        if type(payload) is Reject and payload.message:
            return replace(message, response_payload=Reject(payload.code, _flip_text(payload.message)))
    raise FaultError(f"message {message!r} has no byte to flip")


def _ref(refs: tuple[MessageRef, ...], index: int, fault: Fault) -> MessageRef:
    if index >= len(refs):
        raise FaultError(f"fault {fault.text()}: batch {fault.height} has only {len(refs)} messages")
    return refs[index]


def _with_container(batch: Batch, container: str, messages: tuple) -> Batch:
    if container == INGRESS:
        return replace(batch, ingress=messages)
    payload = tuple(
        (subnet, StreamSlice(s.header, s.messages_begin, messages) if subnet == container else s)
        for subnet, s in batch.xnet_payload
    )
    return replace(batch, xnet_payload=payload)


def _container(batch: Batch, container: str) -> list:
    if container == INGRESS:
        return list(batch.ingress)
    return list(dict(batch.xnet_payload)[container].messages)


def apply_fault(batch: Batch, fault: Fault) -> Batch:
    """``batch`` with ``fault`` applied (``FaultError`` if it names no such message)."""
    if batch.batch_number != fault.height:
        raise FaultError(f"fault for height {fault.height} applied to batch {batch.batch_number}")
    refs = batch_messages(batch)
    first = _ref(refs, fault.message, fault)
    messages = _container(batch, first.container)
    if fault.kind == "flip":
        messages[first.position] = flip_message(first.message)
    elif fault.kind == "drop":
        del messages[first.position]
    else:
        second = _ref(refs, fault.second, fault)
        if second.container != first.container:
            raise FaultError(f"fault {fault.text()}: messages {first.index} and {second.index} are in different "
                             f"parts of the batch ({first.container} and {second.container})")
        messages[first.position], messages[second.position] = messages[second.position], messages[first.position]
    return _with_container(batch, first.container, tuple(messages))
