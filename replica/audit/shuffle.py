"""The shuffle perturbation: the same state and inputs, presented in another order.

Every keyed container of the replicated state (canisters, streams, ingress history,
counters, and per canister its call contexts, callbacks, input and output queues and
stable map) is *filled* in a seeded random order when a state is decoded, and so is the
routing table. Sorted containers should make this invisible; the audit checks that it is.

``present_xnet_payload`` hands a batch's XNet slices to the state machine in a shuffled
order: the ``Batch`` constructor insists on subnet order, and the state machine must not
rely on it (``demux`` sorts), so the shuffled batch is built around that check on purpose.
Sequences whose order is meaningful (queue elements, stream messages, reject signals,
ingress in block order) keep their order. Pure: randomness comes from the ``rng`` given.
"""

from __future__ import annotations

import random
from dataclasses import fields
from typing import Any, Sequence

from message_routing.batch import Batch
from state_manager.codec import CodecError, check_tuple
from state_manager.encoding import EncodingError, decode
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import _CANISTER_ARITY as _CANISTER_ITEMS
from state_manager.state_codec import _STATE_ARITY as _STATE_ITEMS
from state_manager.state_codec import state_encoding_version, state_from_value

from .errors import ReplayError

__all__ = ["shuffled_state", "shuffle_state_value", "present_xnet_payload", "shuffled"]

# Positions in ``state_codec.state_to_value`` / ``_canister_to_value`` (the same in every
# version; later versions append items); the number of items per version is the codec's own.
_TOPOLOGY, _COUNTERS, _CANISTERS, _STREAMS, _HISTORY = 5, 6, 7, 8, 9
_CONTEXTS, _CALLBACKS, _INPUT_QUEUES, _OUTPUT_QUEUES, _STABLE = 8, 9, 11, 12, 14


def shuffled(items: Sequence[Any], rng: random.Random) -> tuple:
    """``items`` in a random order drawn from ``rng``."""
    items = list(items)
    rng.shuffle(items)
    return tuple(items)


def _shuffle_canister(value: Any, rng: random.Random, version: int) -> tuple:
    fields_ = list(check_tuple(value, "canister", _CANISTER_ITEMS[version]))
    for position in (_CONTEXTS, _CALLBACKS, _INPUT_QUEUES, _OUTPUT_QUEUES, _STABLE):
        fields_[position] = shuffled(check_tuple(fields_[position], "canister container"), rng)
    return tuple(fields_)


def shuffle_state_value(value: Any, rng: random.Random) -> tuple:
    """The ``state_to_value`` form with every keyed container's entries shuffled."""
    encoding_version = state_encoding_version(value)
    fields_ = list(check_tuple(value, "state", _STATE_ITEMS[encoding_version]))
    topology = list(check_tuple(fields_[_TOPOLOGY], "topology"))   # its arity is state_from_value's to check
    if len(topology) < 2:
        raise CodecError("topology: too few items")
    topology[1] = shuffled(check_tuple(topology[1], "routing table"), rng)
    fields_[_TOPOLOGY] = tuple(topology)
    fields_[_COUNTERS] = shuffled(check_tuple(fields_[_COUNTERS], "counters"), rng)
    fields_[_CANISTERS] = shuffled(
        [_shuffle_canister(c, rng, encoding_version) for c in check_tuple(fields_[_CANISTERS], "canisters")], rng)
    fields_[_STREAMS] = shuffled(check_tuple(fields_[_STREAMS], "streams"), rng)
    fields_[_HISTORY] = shuffled(check_tuple(fields_[_HISTORY], "ingress history"), rng)
    return tuple(fields_)


def shuffled_state(data: bytes, rng: random.Random) -> ReplicatedState:
    """``decode_state(data)``, but with every container filled in a shuffled order."""
    try:
        value = decode(data, max_bytes=max(len(data), 1))
        return state_from_value(shuffle_state_value(value, rng))
    except (EncodingError, CodecError) as exc:
        raise ReplayError(f"state does not decode: {exc}") from exc


def present_xnet_payload(batch: Batch, rng: random.Random) -> Batch:
    """``batch`` whose ``xnet_payload`` pairs come in a shuffled order (see module docstring)."""
    if len(batch.xnet_payload) < 2:
        return batch
    presented = object.__new__(Batch)
    for field in fields(Batch):
        object.__setattr__(presented, field.name, getattr(batch, field.name))
    object.__setattr__(presented, "xnet_payload", shuffled(batch.xnet_payload, rng))
    return presented
