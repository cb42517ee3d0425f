"""The pull side of XNet as bookkeeping: what to ask each peer subnet for next, and whether
its answer may enter the slice pool (pure).

``SliceFetcher`` remembers, after every block, the expected indices of our state and our own
stream ends, and garbage-collects the pool with them (``remember_indices``). Per peer subnet
``X``, with ``e = expected[X]`` (``(0, 0)`` until a block names ``X``):

    (w, m, k, b) = pool.next_request(X, e, limits.max_slice_messages, limits.max_slice_bytes)
    next_request(X) = None                                  if k = 0 ∨ b = 0
                    = GetStreamSliceRequest(own, w, m, k, b)  otherwise

``k = 0 ∨ b = 0``: a full slice is pooled already; it goes into the next block. The request
and the indices it was made for are remembered until the next request to ``X``.

An answer ``data`` from a replica of ``X`` goes through, in order:

1. ``is_last_answer(X, data)``: the bytes last accepted from ``X`` again (replicas serve the
   same slice until their subnet certifies a new height) — nothing new, nothing wrong;
2. ``decode`` — ``decode_certified_stream_slice`` under ``X``'s key at the given registry
   version, at most ``max_response_bytes``, a witness revealing at most
   ``max_witness_extra_positions(limits)`` positions beyond its payload; raises
   ``SliceDecodeError``. It reads no bookkeeping, so a shell may run it, the slow step (a
   signature check), outside its lock;
3. ``accept`` — ``check_fetched_slice`` against the last request to ``X`` and the expected
   indices *it was made for* (a block executed while the answer travelled may have moved them
   on, which is not the replica's fault; no request yet: no check); raises
   ``FetchedSliceRejected``; then ``pool.put`` (which keeps the slice only if it adds
   something) and the bytes become ``X``'s last answer.
"""

from __future__ import annotations

from typing import Iterable

from message_routing.limits import Limits
from state_manager.certified_slice import CertifiedSlice, decode_certified_stream_slice
from state_manager.messages import SubnetId
from state_manager.replicated_state import ReplicatedState
from state_manager.streams import ExpectedIndices

from .expected_indices import expected_indices
from .fetched_slice import check_fetched_slice
from .payload_validator import PublicKeyLookup, max_witness_extra_positions, own_stream_end
from .slice_pool import SlicePool
from .slice_request import GetStreamSliceRequest

__all__ = ["SliceFetcher"]


class SliceFetcher:
    """Fetch bookkeeping for ``pool.own_subnet`` (module docstring). Not thread-safe: a shell
    serializes every call but ``decode``."""

    __slots__ = ("own_subnet", "pool", "limits", "max_response_bytes",
                 "_expected", "_own_stream_ends", "_requested", "_last_answer")

    def __init__(self, pool: SlicePool, limits: Limits, max_response_bytes: int) -> None:
        self.own_subnet: SubnetId = pool.own_subnet
        self.pool = pool
        self.limits = limits
        self.max_response_bytes = max_response_bytes
        self._expected: dict[SubnetId, ExpectedIndices] = {}
        self._own_stream_ends: dict[SubnetId, int] = {}
        self._requested: dict[SubnetId, tuple[GetStreamSliceRequest, ExpectedIndices]] = {}
        self._last_answer: dict[SubnetId, bytes] = {}

    def remember_indices(self, state: ReplicatedState, remotes: Iterable[SubnetId]) -> None:
        """After a block: ``expected = expected_indices(state, remotes)``, ``own_stream_end(state,
        X)`` for every peer ``X`` in ``remotes``, and ``pool.garbage_collect(expected)``."""
        peers = [remote for remote in remotes if remote != self.own_subnet]
        self._expected = expected_indices(state, peers)
        self._own_stream_ends = {remote: own_stream_end(state, remote) for remote in peers}
        self.pool.garbage_collect(self._expected)

    def expected(self, remote: SubnetId) -> ExpectedIndices:
        """The remembered expected indices for ``remote`` (``(0, 0)`` if none)."""
        return self._expected.get(remote, ExpectedIndices(0, 0))

    def next_request(self, remote: SubnetId) -> GetStreamSliceRequest | None:
        """What to ask ``remote``'s replicas for now, or ``None`` (module docstring)."""
        expected = self.expected(remote)
        witness_begin, msg_begin, msg_limit, byte_limit = self.pool.next_request(
            remote, expected, self.limits.max_slice_messages, self.limits.max_slice_bytes)
        if msg_limit == 0 or byte_limit == 0:
            return None
        request = GetStreamSliceRequest(self.own_subnet, witness_begin, msg_begin, msg_limit, byte_limit)
        self._requested[remote] = (request, expected)
        return request

    def is_last_answer(self, remote: SubnetId, data: bytes) -> bool:
        """``data`` is exactly what was last accepted from ``remote``."""
        return self._last_answer.get(remote) == data

    def decode(self, remote: SubnetId, data: bytes, public_key_for: PublicKeyLookup,
               registry_version: int) -> CertifiedSlice:
        """Decode and verify an answer from ``remote`` (step 2); raises ``SliceDecodeError``.
        Reads only what never changes after construction."""
        return decode_certified_stream_slice(
            self.own_subnet, remote, public_key_for, registry_version, data,
            max_bytes=self.max_response_bytes, max_extra_positions=max_witness_extra_positions(self.limits))

    def accept(self, remote: SubnetId, data: bytes, decoded: CertifiedSlice) -> None:
        """Check a decoded answer against the last request to ``remote`` and pool it (step 3);
        raises ``FetchedSliceRejected`` and leaves everything unchanged if it is refused."""
        asked = self._requested.get(remote)
        if asked is not None:
            request, expected = asked
            check_fetched_slice(decoded, request.witness_begin, request.msg_begin, expected,
                                self._own_stream_ends.get(remote, 0), self.pool.get(remote))
        self.pool.put(remote, data, decoded)
        self._last_answer[remote] = data
