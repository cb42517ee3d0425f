"""Where an agent reaches each subnet: its nodes' ingress addresses, in the order they are tried.

``EndpointBook(endpoints, source)`` holds one list of ``"host:port"`` addresses (an agent
for one subnet) or one per subnet. The node that answered last goes first (``prefer``), so a
node that went silent is not asked first again. ``refresh()`` re-reads the addresses from
``source`` (e.g. a testnet directory's ``http/<subnet>.json``, where a restarted node's
address appears again, on a new port if it could not have its old one): a subnet the source
does not mention keeps what the book had (its nodes may all be restarting), a node that kept
its address keeps its place, a new one is tried after them.
"""

from __future__ import annotations

import threading
from typing import Callable, Mapping, Sequence, Union

__all__ = ["EndpointBook", "Endpoints", "endpoint_list"]

#: What an agent is told: one address, a list of one subnet's, or ``{subnet: address(es)}``.
Endpoints = Union[str, Sequence[str], Mapping[str, Union[str, Sequence[str]]]]


def endpoint_list(endpoints: str | Sequence[str]) -> tuple[str, ...]:
    return (endpoints,) if isinstance(endpoints, str) else tuple(endpoints)


def _by_subnet(endpoints: Endpoints) -> dict[str | None, tuple[str, ...]]:
    """The book's form: ``{None: addresses}`` for one list, else ``{subnet: addresses}``."""
    if isinstance(endpoints, Mapping):
        return {subnet: endpoint_list(addresses) for subnet, addresses in endpoints.items()}
    return {None: endpoint_list(endpoints)}


def _merged(current: tuple[str, ...], fresh: tuple[str, ...]) -> tuple[str, ...]:
    """``fresh`` in the book's order: addresses already known keep their places, new ones follow."""
    kept = tuple(address for address in current if address in fresh)
    return kept + tuple(address for address in fresh if address not in kept)


class EndpointBook:
    """A subnet's (or the one list's) addresses in trying order; thread-safe (module docstring)."""

    def __init__(self, endpoints: Endpoints, source: Callable[[], Endpoints | None] | None = None) -> None:
        self._book = _by_subnet(endpoints)
        if not self._book or not all(self._book.values()):
            raise ValueError("every subnet needs at least one endpoint")
        self.per_subnet = None not in self._book
        self._source = source
        self._lock = threading.Lock()

    def subnets(self) -> list[str]:
        """The subnets the book knows addresses of (none for a single list)."""
        with self._lock:
            return [subnet for subnet in self._book if subnet is not None]

    def candidates(self, subnet: str | None) -> tuple[str, ...] | None:
        """The addresses to try for ``subnet`` (``None``: the single list), first first;
        ``None`` if the book has none for it."""
        with self._lock:
            return self._book.get(subnet if self.per_subnet else None)

    def prefer(self, subnet: str | None, endpoint: str) -> None:
        """Try ``endpoint`` first for ``subnet`` from now on (it answered)."""
        key = subnet if self.per_subnet else None
        with self._lock:
            current = self._book.get(key, ())
            if current and current[0] != endpoint and endpoint in current:
                self._book[key] = (endpoint,) + tuple(e for e in current if e != endpoint)

    def refresh(self) -> bool:
        """Re-read the addresses from the source (none: nothing to do); whether any changed."""
        if self._source is None:
            return False
        fresh = self._source()
        if fresh is None:
            return False
        fresh_book = _by_subnet(fresh)
        if (None in fresh_book) == self.per_subnet:
            raise ValueError("an endpoint source must answer in the form the book was made with")
        changed = False
        with self._lock:
            for subnet, addresses in fresh_book.items():
                if not addresses:
                    continue   # nothing serves it right now: keep trying what we had
                merged = _merged(self._book.get(subnet, ()), addresses)
                if merged != self._book.get(subnet):
                    self._book[subnet] = merged
                    changed = True
        return changed
