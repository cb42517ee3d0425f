"""Routing table (canister-id ranges → subnet) and canister migrations, from the registry."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from .errors import StateManagerError
from .messages import CanisterId, SubnetId

__all__ = ["CanisterIdRange", "RoutingTable", "CanisterMigrations", "NetworkTopology", "RoutingTableError"]

MAX_CANISTER_ID = 2**64 - 1


class RoutingTableError(StateManagerError, ValueError):
    pass


@dataclass(frozen=True, slots=True, order=True)
class CanisterIdRange:
    """Canister ids ``start ..= end`` (inclusive, as the registry writes ranges)."""

    start: CanisterId
    end: CanisterId

    def __post_init__(self) -> None:
        if not (0 <= self.start <= self.end <= MAX_CANISTER_ID):
            raise RoutingTableError(f"bad canister id range [{self.start}, {self.end}]")

    def contains(self, canister: CanisterId) -> bool:
        return self.start <= canister <= self.end


@dataclass(frozen=True, slots=True)
class RoutingTable:
    """Disjoint ranges sorted by start; ``lookup`` is a binary search (O(log n))."""

    entries: tuple[tuple[CanisterIdRange, SubnetId], ...]
    _starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        entries = tuple(sorted(self.entries))
        for (a, _), (b, _) in zip(entries, entries[1:]):
            if b.start <= a.end:
                raise RoutingTableError(f"overlapping ranges {a} and {b}")
        object.__setattr__(self, "entries", entries)
        object.__setattr__(self, "_starts", tuple(r.start for r, _ in entries))

    def lookup(self, canister: CanisterId) -> SubnetId | None:
        """``route(canister)``: the subnet hosting ``canister``, or None if no range holds it."""
        i = bisect_right(self._starts, canister) - 1
        if i < 0:
            return None
        canister_range, subnet = self.entries[i]
        return subnet if canister <= canister_range.end else None

    def ranges_of(self, subnet: SubnetId) -> tuple[CanisterIdRange, ...]:
        return tuple(r for r, s in self.entries if s == subnet)

    def with_assignment(self, assigned: CanisterIdRange, subnet: SubnetId) -> "RoutingTable":
        """This table with ``assigned`` mapped to ``subnet``: the ranges it overlaps are cut
        around it, and neighbouring ranges of one subnet are merged again (so moving a canister
        away and back gives the original table)."""
        entries: list[tuple[CanisterIdRange, SubnetId]] = []
        for canister_range, owner in self.entries:
            if canister_range.end < assigned.start or assigned.end < canister_range.start:
                entries.append((canister_range, owner))
                continue
            if canister_range.start < assigned.start:
                entries.append((CanisterIdRange(canister_range.start, assigned.start - 1), owner))
            if assigned.end < canister_range.end:
                entries.append((CanisterIdRange(assigned.end + 1, canister_range.end), owner))
        entries.append((assigned, subnet))
        merged: list[tuple[CanisterIdRange, SubnetId]] = []
        for canister_range, owner in sorted(entries):
            if merged and merged[-1][1] == owner and merged[-1][0].end + 1 == canister_range.start:
                merged[-1] = (CanisterIdRange(merged[-1][0].start, canister_range.end), owner)
            else:
                merged.append((canister_range, owner))
        return RoutingTable(tuple(merged))

    def subnets(self) -> tuple[SubnetId, ...]:
        return tuple(sorted({s for _, s in self.entries}))


@dataclass(frozen=True, slots=True)
class CanisterMigrations:
    """Ranges being migrated, each with its trace of subnets (from the source to the target).

    While a range migrates, messages from any subnet on its trace are authentic, and
    messages for it reaching a subnet that no longer hosts it are rejected as migrating.
    """

    entries: tuple[tuple[CanisterIdRange, tuple[SubnetId, ...]], ...] = ()

    def trace(self, canister: CanisterId) -> tuple[SubnetId, ...]:
        for canister_range, trace in self.entries:
            if canister_range.contains(canister):
                return trace
        return ()

    def with_trace(self, migrating: CanisterIdRange, trace: tuple[SubnetId, ...]) -> "CanisterMigrations":
        """These migrations plus ``migrating`` on ``trace`` (source first, destination last)."""
        if len(trace) < 2 or any(r.start <= migrating.end and migrating.start <= r.end for r, _ in self.entries):
            raise RoutingTableError(f"cannot trace {migrating} along {trace}: a trace names two subnets or more, "
                                    f"and a range is on one trace at a time")
        return CanisterMigrations(tuple(sorted((*self.entries, (migrating, tuple(trace))))))

    def without(self, migrating: CanisterIdRange) -> "CanisterMigrations":
        """These migrations without the trace of ``migrating`` (the migration is over)."""
        return CanisterMigrations(tuple(e for e in self.entries if e[0] != migrating))


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    """The registry view a batch is processed under. ``subnet_public_keys`` are the subnets'
    threshold keys (raw G2), ``node_public_keys`` each subnet's node signing keys (DER, in
    node-index order): the certified tree serves both to agents (``state_tree``)."""

    registry_version: int
    routing_table: RoutingTable
    canister_migrations: CanisterMigrations = CanisterMigrations()
    subnet_public_keys: tuple[tuple[SubnetId, bytes], ...] = ()
    node_public_keys: tuple[tuple[SubnetId, tuple[bytes, ...]], ...] = ()

    def public_key(self, subnet: SubnetId) -> bytes | None:
        for subnet_id, key in self.subnet_public_keys:
            if subnet_id == subnet:
                return key
        return None

    def node_keys(self, subnet: SubnetId) -> tuple[bytes, ...]:
        for subnet_id, keys in self.node_public_keys:
            if subnet_id == subnet:
                return keys
        return ()
