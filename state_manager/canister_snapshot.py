"""A canister's whole state as bytes, to move it from one subnet to another.

``encode_canister_snapshot(canister)`` is canonical msgpack ``[SNAPSHOT_VERSION,
STATE_ENCODING_VERSION, canister]`` with the canister encoded exactly as in a state
checkpoint (``state_codec``): id, module (name, hash and, for a source module, its source),
status, controller, certified data, call contexts, callbacks, queues, stable state and, from
state encoding version 4 on, its log. Its ``snapshot_hash`` is SHA-256 of those bytes: the
source subnet certifies it in the answer of ``export_canister``, and the destination installs
the snapshot only if the bytes it gets hash to the value it is given. ``decode_canister_snapshot`` checks strictly (version, canonical
encoding, every field) and raises ``CorruptSnapshot`` with the reason.
"""

from __future__ import annotations

import hashlib

from .canister_state import CanisterState
from .codec import CodecError
from .encoding import EncodingError, decode, encode
from .errors import StateManagerError
from .state_codec import (
    BOUNDED_WAIT_STATE_ENCODING_VERSION, LOG_STATE_ENCODING_VERSION, _canister_from_value, _canister_to_value,
    canister_encoding_version, canister_uses_deadlines,
)

__all__ = ["SNAPSHOT_VERSION", "CorruptSnapshot", "encode_canister_snapshot", "decode_canister_snapshot",
           "snapshot_hash"]

SNAPSHOT_VERSION = 1


class CorruptSnapshot(StateManagerError):
    """Snapshot bytes that do not decode to a canister."""


def encode_canister_snapshot(canister: CanisterState) -> bytes:
    """The canister at the state encoding version a state holding only it would have (4 if
    it has a log, else 3 if it holds deadlines of bounded-wait calls, else 2), so each
    canister has one snapshot."""
    version = canister_encoding_version(canister)
    return encode([SNAPSHOT_VERSION, version, _canister_to_value(canister, version)])


def snapshot_hash(snapshot: bytes) -> bytes:
    """``SHA-256(snapshot)``: what ``export_canister`` certifies and ``import_canister`` checks."""
    return hashlib.sha256(snapshot).digest()


def decode_canister_snapshot(snapshot: bytes) -> CanisterState:
    if not isinstance(snapshot, bytes):
        raise CorruptSnapshot("a canister snapshot is bytes")
    try:
        value = decode(snapshot)
    except EncodingError as exc:
        raise CorruptSnapshot(f"not canonical msgpack: {exc}") from exc
    if not (isinstance(value, tuple) and len(value) == 3):
        raise CorruptSnapshot("a canister snapshot is [version, state encoding version, canister]")
    version, state_version, canister = value
    if version != SNAPSHOT_VERSION or type(version) is not int:
        raise CorruptSnapshot(f"unknown snapshot version {version!r}")
    if type(state_version) is not int or not 1 <= state_version <= LOG_STATE_ENCODING_VERSION:
        raise CorruptSnapshot(f"unknown state encoding version {state_version!r}")
    try:
        decoded = _canister_from_value(canister, state_version)
    except CodecError as exc:
        raise CorruptSnapshot(f"canister: {exc}") from exc
    if state_version == LOG_STATE_ENCODING_VERSION:
        if not decoded.log.next_index:
            raise CorruptSnapshot("state encoding version 4 holds a canister without a log")
    elif canister_uses_deadlines(decoded) != (state_version == BOUNDED_WAIT_STATE_ENCODING_VERSION):
        raise CorruptSnapshot(f"state encoding version {state_version} does not match whether it holds deadlines")
    return decoded
