"""Which node signed which state root, per height, and what that says when certification
fails (pure; docs/architecture.md, *Guarantees, and where each is tested*: divergence).

Two failures are told apart here, from arguments only:

* **a node diverged**: the subnet certified a root at some height and the node's own root
  there is another (``Divergence``: the height, both roots, who signed which root). The node
  is in the minority: it stops signing and recovers its state from a checkpoint the subnet
  certified (state sync);
* **certification stalled**: a height above the last certified one has shares but no root
  with ``t`` of them, and the subnet has finalized ``rounds`` heights past it
  (``CertificationStall``): the shares disagree (two or more roots), or too few came.

``ShareTally`` keeps the shares each height received, including those that arrive after its
certification (the minority's), for a bounded window of heights. It trusts a share's node
index as it stands; ``CertificationAggregator.shares_at`` reports only shares that verify.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from state_manager.certification import CertificationShare

__all__ = ["RootSigners", "SharesAtHeight", "Divergence", "CertificationStall", "ShareTally", "short_root",
           "group_shares"]

#: Hex digits of a root shown in logs and status lines.
ROOT_PREFIX = 8


def short_root(root: bytes) -> str:
    return root.hex()[:ROOT_PREFIX] + "…"


@dataclass(frozen=True, slots=True)
class RootSigners:
    """The nodes whose shares at one height sign ``root``."""

    root: bytes
    node_ids: tuple[str, ...]

    def describe(self) -> str:
        return f"root {short_root(self.root)}: {','.join(self.node_ids)}"

    def as_json(self) -> dict:
        return {"root": self.root.hex(), "signers": list(self.node_ids)}


@dataclass(frozen=True, slots=True)
class SharesAtHeight:
    """The shares of one height grouped by root: most signers first, then by root bytes."""

    height: int
    roots: tuple[RootSigners, ...]

    @property
    def disagree(self) -> bool:
        return len(self.roots) > 1

    def signers_of(self, root: bytes) -> tuple[str, ...]:
        return next((r.node_ids for r in self.roots if r.root == root), ())

    def with_signer(self, root: bytes, node_id: str) -> "SharesAtHeight":
        """These shares with ``node_id`` among the signers of ``root`` (a node's own share,
        which it knows without having received it back)."""
        by_root = {r.root: set(r.node_ids) for r in self.roots}
        by_root.setdefault(root, set()).add(node_id)
        roots = [RootSigners(r, tuple(sorted(names))) for r, names in by_root.items()]
        roots.sort(key=lambda r: (-len(r.node_ids), r.root))
        return SharesAtHeight(self.height, tuple(roots))

    def describe(self) -> str:
        return "; ".join(r.describe() for r in self.roots) or "no shares"

    def as_json(self) -> list:
        return [r.as_json() for r in self.roots]


def group_shares(height: int, shares: Iterable[CertificationShare], node_ids: Sequence[str]) -> SharesAtHeight:
    """``shares`` of ``height`` grouped by root, nodes named by ``node_ids`` (index ``i`` is
    ``node_ids[i - 1]``; an index outside it is shown as ``#i``). Deterministic order."""
    by_root: dict[bytes, list[int]] = {}
    for share in shares:
        if share.height == height:
            by_root.setdefault(share.root, []).append(share.node_index)

    def name(index: int) -> str:
        return node_ids[index - 1] if 1 <= index <= len(node_ids) else f"#{index}"

    roots = [RootSigners(root, tuple(name(i) for i in sorted(set(indices)))) for root, indices in by_root.items()]
    roots.sort(key=lambda r: (-len(r.node_ids), r.root))
    return SharesAtHeight(height, tuple(roots))


@dataclass(frozen=True, slots=True)
class Divergence:
    """This node's root at ``height`` is not the one the subnet certified there."""

    height: int
    own_root: bytes
    certified_root: bytes
    shares: SharesAtHeight

    def describe(self) -> str:
        return (f"diverged at height {self.height}: own root {short_root(self.own_root)}, certified "
                f"{short_root(self.certified_root)} ({self.shares.describe()})")

    def as_json(self) -> dict:
        return {"height": self.height, "own_root": self.own_root.hex(), "certified_root": self.certified_root.hex(),
                "shares": self.shares.as_json()}


@dataclass(frozen=True, slots=True)
class CertificationStall:
    """No certification at ``height`` (nor above) while ``finalized_height`` is past it."""

    height: int
    finalized_height: int
    threshold: int
    shares: SharesAtHeight

    @property
    def reason(self) -> str:
        if self.shares.disagree:
            return "shares disagree"
        have = len(self.shares.roots[0].node_ids) if self.shares.roots else 0
        return f"too few shares ({have} of {self.threshold})"

    def describe(self) -> str:
        return f"certification stalled since {self.height}: {self.reason} ({self.shares.describe()})"

    def as_json(self) -> dict:
        return {"height": self.height, "finalized_height": self.finalized_height, "reason": self.reason,
                "threshold": self.threshold, "shares": self.shares.as_json()}


class ShareTally:
    """Shares per height, at most ``keep`` heights above the last certified one and ``keep``
    at or below it (module docstring). A node's first share of a height counts; a later one
    of the same node and height is ignored, as the certification pool does."""

    __slots__ = ("_keep", "_shares", "certified_height")

    def __init__(self, keep: int = 64) -> None:
        self._keep = max(1, keep)
        self._shares: dict[int, dict[int, CertificationShare]] = {}
        self.certified_height = 0

    def add(self, share: CertificationShare) -> None:
        height = share.height
        if height <= self.certified_height - self._keep:
            return
        at = self._shares.get(height)
        if at is None:
            above = sorted(h for h in self._shares if h > self.certified_height)
            if height > self.certified_height and len(above) >= self._keep:
                if height > above[-1]:
                    return   # a window of the lowest uncertified heights: those decide a stall
                del self._shares[above[-1]]
            at = self._shares[height] = {}
        at.setdefault(share.node_index, share)

    def certified(self, height: int) -> None:
        """Height ``height`` is certified: heights ``keep`` below it are forgotten."""
        if height > self.certified_height:
            self.certified_height = height
            for old in [h for h in self._shares if h <= height - self._keep]:
                del self._shares[old]

    def shares(self, height: int) -> tuple[CertificationShare, ...]:
        return tuple(self._shares.get(height, {}).values())

    def stalled_height(self, finalized_height: int, rounds: int) -> Optional[int]:
        """The lowest height above the last certified one, at least ``rounds`` below
        ``finalized_height``, whose shares disagree; else the lowest such height with shares
        (too few of them: nodes that lagged do not sign); ``None`` if there is none."""
        candidates = sorted(h for h in self._shares if self.certified_height < h <= finalized_height - rounds
                            and self._shares[h])
        disagreeing = [h for h in candidates if len({s.root for s in self._shares[h].values()}) > 1]
        return disagreeing[0] if disagreeing else candidates[0] if candidates else None
