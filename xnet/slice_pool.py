"""The slice pool: verified certified slices waiting to go into blocks, one per peer (pure).

The refresher fetches slices in the background and ``put``s them here *after* decoding and
verifying them (``decode_certified_stream_slice``); the payload builder reads the pool at
block making time and never waits for the network. Per peer subnet the pool keeps at most
one slice, and it only ever gets more useful:

* **continuation** — a newer slice fetched with ``witness_begin ≤ a`` and ``msg_begin = b``
  for the pooled messages ``[a, b)`` is appended (``append_certified_slice``): messages
  ``[a, c)`` under the newer witness and certification;
* **replacement** — otherwise the new slice replaces the pooled one only if it is *more
  useful* (``is_more_useful``).

``garbage_collect`` cuts pooled messages below the expected message index and drops slices
that have nothing left to offer. The pool never holds more than ``max_bytes``: a slice
larger than that is cut to its longest message prefix that fits, and other peers' slices are
evicted, largest first (ties: the greater subnet id first), until the pool fits.
``next_request`` shrinks a fetch by what is already pooled, so with ``max_bytes`` of at least
(number of peers × the per-fetch byte limit) eviction is rare.

The caller runs ``garbage_collect`` with the expected indices (state plus past payloads)
whenever they move — after each block — so that pooled messages begin at the expected
index and ``next_request`` continues them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from state_manager.certified_slice import (
    CertifiedSlice,
    CertifiedSliceError,
    append_certified_slice,
    restrict_certified_slice,
)
from state_manager.messages import SubnetId
from state_manager.streams import ExpectedIndices, StreamSlice

from .errors import InvalidPoolRequest

__all__ = [
    "PooledSlice", "SlicePool", "is_more_useful", "continues", "restrict_pooled_slice",
]

_U64 = 2**64


@dataclass(frozen=True, slots=True)
class PooledSlice:
    """A verified certified slice from ``remote``, with what the pool needs to know of it.

    ``stream_slice`` is what ``data`` decodes to (a header-only slice has ``messages_begin =
    header.end``); ``witness_begin`` is the lowest message index the witness reveals;
    ``byte_size = len(data)``.
    """

    remote: SubnetId
    data: bytes
    stream_slice: StreamSlice
    certification_height: int
    witness_begin: int
    byte_size: int


def _pooled(remote: SubnetId, data: bytes, decoded: CertifiedSlice) -> PooledSlice:
    return PooledSlice(remote, bytes(data), decoded.stream_slice, decoded.certification.height,
                       decoded.witness_begin, len(data))


def _covers(new: StreamSlice, old: StreamSlice) -> bool:
    """``messages(new) ⊇ messages(old)`` as index ranges (every range covers the empty one)."""
    if not old.messages:
        return True
    return bool(new.messages) and new.messages_begin <= old.messages_begin and old.messages_end <= new.messages_end


def is_more_useful(new: PooledSlice, old: PooledSlice) -> bool:
    """``new`` may replace ``old``: it loses neither signals nor certification height,

    ``s_new ≥ s_old ∧ h_new ≥ h_old`` (``s = header.signals_end``, ``h = certification height``),
    and it gains something:

    * more messages from the same begin: ``b_new − a_new > b_old − a_old ∧ (a_new = a_old ∨
      old has no messages)``; or
    * newer signals without losing messages: ``s_new > s_old ∧ [a_new, b_new) ⊇ [a_old, b_old)``; or
    * a newer certification covering at least the same messages:
      ``h_new > h_old ∧ [a_new, b_new) ⊇ [a_old, b_old)``.
    """
    n, o = new.stream_slice, old.stream_slice
    s_new, s_old = n.header.signals_end, o.header.signals_end
    if s_new < s_old or new.certification_height < old.certification_height:
        return False
    if len(n.messages) > len(o.messages) and (not o.messages or n.messages_begin == o.messages_begin):
        return True
    if s_new > s_old and _covers(n, o):
        return True
    return new.certification_height > old.certification_height and _covers(n, o)


def continues(new: CertifiedSlice, old: PooledSlice) -> bool:
    """``new`` extends ``old``'s messages ``[a, b)`` (``append_certified_slice`` applies):
    ``a < b``, ``h_new ≥ h_old``, ``s_new ≥ s_old``, ``new.witness_begin ≤ a`` and either
    ``new`` carries messages beginning at ``b`` or (header-only) its witness reaches ``b``."""
    o, n = old.stream_slice, new.stream_slice
    if not o.messages:
        return False
    if new.certification.height < old.certification_height or n.header.signals_end < o.header.signals_end:
        return False
    if new.witness_begin > o.messages_begin:
        return False
    if n.messages:
        return n.messages_begin == o.messages_end
    return new.witness_end >= o.messages_end


def restrict_pooled_slice(pooled: PooledSlice, msg_begin: int, msg_end: int) -> PooledSlice:
    """``pooled`` with its messages cut to ``[msg_begin, msg_end)`` (``restrict_certified_slice``;
    ``msg_begin == msg_end`` gives the header-only slice). The witness is unchanged."""
    old = pooled.stream_slice
    data = restrict_certified_slice(pooled.data, msg_begin, msg_end)
    if msg_begin == msg_end:
        stream_slice = StreamSlice(old.header, old.header.end, ())
    else:
        offset = msg_begin - old.messages_begin
        stream_slice = StreamSlice(old.header, msg_begin, old.messages[offset : offset + msg_end - msg_begin])
    return PooledSlice(pooled.remote, data, stream_slice, pooled.certification_height, pooled.witness_begin, len(data))


def _longest_prefix_within(pooled: PooledSlice, max_bytes: int) -> PooledSlice | None:
    """``pooled`` cut to its longest message prefix of at most ``max_bytes`` encoded bytes
    (possibly header-only); ``None`` if not even the header-only slice fits."""
    if pooled.byte_size <= max_bytes:
        return pooled
    s = pooled.stream_slice
    begin = s.messages_begin
    best = restrict_pooled_slice(pooled, s.messages_end, s.messages_end)
    if best.byte_size > max_bytes:
        return None
    low, high = 1, len(s.messages) - 1  # the full slice is known not to fit
    while low <= high:  # encoded size grows with every message: binary search the count
        middle = (low + high) // 2
        candidate = restrict_pooled_slice(pooled, begin, begin + middle)
        if candidate.byte_size <= max_bytes:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    return best


def _check_count(value: object, what: str) -> int:
    if type(value) is not int or not 0 <= value < _U64:
        raise InvalidPoolRequest(f"{what} must be an integer in [0, 2**64), got {value!r}")
    return value


class SlicePool:
    """At most one verified slice per peer subnet of ``own_subnet``, at most ``max_bytes`` in all."""

    __slots__ = ("own_subnet", "max_bytes", "_slices")

    def __init__(self, own_subnet: SubnetId, max_bytes: int) -> None:
        if type(own_subnet) is not str:
            raise InvalidPoolRequest(f"own subnet must be a str, got {type(own_subnet).__name__}")
        if type(max_bytes) is not int or max_bytes < 1:
            raise InvalidPoolRequest(f"max_bytes must be a positive integer, got {max_bytes!r}")
        self.own_subnet = own_subnet
        self.max_bytes = max_bytes
        self._slices: dict[SubnetId, PooledSlice] = {}

    # -- reads --------------------------------------------------------------------------------

    def get(self, remote: SubnetId) -> PooledSlice | None:
        return self._slices.get(remote)

    def remotes(self) -> tuple[SubnetId, ...]:
        """The peers with a pooled slice, sorted."""
        return tuple(sorted(self._slices))

    def byte_size(self) -> int:
        """``Σ len(data)`` over the pooled slices (never above ``max_bytes``)."""
        return sum(pooled.byte_size for pooled in self._slices.values())

    def next_request(
        self, remote: SubnetId, expected: ExpectedIndices, msg_limit: int, byte_limit: int
    ) -> tuple[int, int, int, int]:
        """What to fetch next from ``remote``: ``(witness_begin, msg_begin, msg_limit, byte_limit)``.

        If the pool holds messages ``[a, b)`` with ``a ≤ expected.message_index < b``: ``(a, b,
        msg_limit − k, byte_limit − pooled bytes)`` (floored at 0), ``k = b − max(a, expected)``
        — the answer continues the pooled messages (``msg_limit`` 0 asks for a header-only
        refresh of signals and certification). Otherwise ``(e, e, msg_limit, byte_limit)`` with
        ``e = expected.message_index``.
        """
        _check_count(msg_limit, "msg_limit")
        _check_count(byte_limit, "byte_limit")
        e = _check_count(expected.message_index, "expected message index")
        pooled = self._slices.get(remote)
        if pooled is not None:
            s = pooled.stream_slice
            if s.messages and s.messages_begin <= e < s.messages_end:
                held = s.messages_end - max(s.messages_begin, e)
                return (s.messages_begin, s.messages_end, max(0, msg_limit - held),
                        max(0, byte_limit - pooled.byte_size))
        return (e, e, msg_limit, byte_limit)

    # -- writes -------------------------------------------------------------------------------

    def put(self, remote: SubnetId, data: bytes, decoded: CertifiedSlice) -> bool:
        """Offer a slice from ``remote`` that the caller decoded and verified into ``decoded``.

        Accepted (``True``) if the pool holds nothing for ``remote``, if it ``continues`` the
        pooled slice and adds messages, signals or certification height (appended), or if it
        ``is_more_useful`` than the pooled slice (replaces it); then the byte bound is restored
        (module docstring). Rejected (``False``, pool unchanged): slices from our own subnet,
        anything else, continuations that do not merge, and slices whose header alone exceeds
        ``max_bytes``.
        """
        if type(remote) is not str:
            raise InvalidPoolRequest(f"remote subnet must be a str, got {type(remote).__name__}")
        if type(data) is not bytes:
            raise InvalidPoolRequest(f"slice data must be bytes, got {type(data).__name__}")
        if not isinstance(decoded, CertifiedSlice):
            raise InvalidPoolRequest(f"expected the decoded CertifiedSlice, got {type(decoded).__name__}")
        if remote == self.own_subnet:
            return False
        new = _pooled(remote, data, decoded)
        current = self._slices.get(remote)
        if current is None:
            return self._store(new)
        if continues(decoded, current):
            gains = (
                bool(new.stream_slice.messages)
                or new.certification_height > current.certification_height
                or new.stream_slice.header.signals_end > current.stream_slice.header.signals_end
            )
            if not gains:
                return False
            try:
                merged = append_certified_slice(current.data, new.data)
            except CertifiedSliceError:
                return False
            old = current.stream_slice
            stream_slice = StreamSlice(decoded.stream_slice.header, old.messages_begin,
                                       old.messages + decoded.stream_slice.messages)
            return self._store(PooledSlice(remote, merged, stream_slice, new.certification_height,
                                           decoded.witness_begin, len(merged)))
        if is_more_useful(new, current):
            return self._store(new)
        return False

    def remove(self, remote: SubnetId) -> bool:
        """Forget ``remote``'s slice (e.g. it left the registry); whether there was one."""
        return self._slices.pop(remote, None) is not None

    def garbage_collect(self, expected: Mapping[SubnetId, ExpectedIndices]) -> None:
        """For each pooled peer ``X`` in ``expected`` (others are left alone), with
        ``e = expected[X]`` and pooled messages ``[a, b)``:

        * ``a ≤ e.message_index < b``: keep messages ``[e.message_index, b)``;
        * otherwise (all below the expected index, or a gap above it): keep none;
        * then drop the slice if it has no messages and ``header.signals_end ≤ e.signal_index``
          (no new signals).
        """
        for remote in sorted(self._slices):
            e = expected.get(remote)
            if e is None:
                continue
            pooled = self._slices[remote]
            s = pooled.stream_slice
            if s.messages:
                if s.messages_begin <= e.message_index < s.messages_end:
                    if e.message_index > s.messages_begin:
                        pooled = restrict_pooled_slice(pooled, e.message_index, s.messages_end)
                else:
                    pooled = restrict_pooled_slice(pooled, s.messages_end, s.messages_end)
            if not pooled.stream_slice.messages and pooled.stream_slice.header.signals_end <= e.signal_index:
                del self._slices[remote]
            else:
                self._slices[remote] = pooled

    def _store(self, candidate: PooledSlice) -> bool:
        """Put ``candidate`` in its peer's place within ``max_bytes``: cut it to its longest
        fitting message prefix, then evict other peers' slices, largest first (ties: greater
        subnet id first), until the pool fits."""
        fitted = _longest_prefix_within(candidate, self.max_bytes)
        if fitted is None:
            return False
        remote = fitted.remote
        self._slices.pop(remote, None)
        total = self.byte_size() + fitted.byte_size
        victims = sorted(self._slices.values(), key=lambda p: (p.byte_size, p.remote), reverse=True)
        for victim in victims:
            if total <= self.max_bytes:
                break
            del self._slices[victim.remote]
            total -= victim.byte_size
        self._slices[remote] = fitted
        return True
