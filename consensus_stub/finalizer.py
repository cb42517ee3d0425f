"""Finalization: a proposal at a height is final once ``t`` of the subnet's nodes accept it (pure).

Each member votes at most once per height, for one block hash (a later vote of the same
node is ignored); votes of non-members are ignored. The first hash with ``t`` votes is
final, and no other hash at that height can become final afterwards (honest nodes vote
once; with ``t = 2f + 1`` of ``n = 3f + 1``, two hashes cannot both reach ``t``).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["Tally"]


class Tally:
    """Votes of one height."""

    __slots__ = ("height", "threshold", "_members", "_votes", "_final")

    def __init__(self, height: int, threshold: int, members: Iterable[str]) -> None:
        members = frozenset(members)
        if type(threshold) is not int or not 1 <= threshold <= len(members):
            raise ValueError(f"threshold must be in 1..{len(members)}, got {threshold!r}")
        self.height = height
        self.threshold = threshold
        self._members = members
        self._votes: dict[str, bytes] = {}
        self._final: bytes | None = None

    def vote(self, node_id: str, block_hash: bytes) -> bytes | None:
        """Record ``node_id``'s acceptance of ``block_hash``; return the final hash, if any."""
        if node_id in self._members and node_id not in self._votes:
            self._votes[node_id] = block_hash
            if self._final is None and self.votes_for(block_hash) >= self.threshold:
                self._final = block_hash
        return self._final

    def votes_for(self, block_hash: bytes) -> int:
        return sum(1 for voted in self._votes.values() if voted == block_hash)

    def has_voted(self, node_id: str) -> bool:
        return node_id in self._votes

    @property
    def final(self) -> bytes | None:
        return self._final
