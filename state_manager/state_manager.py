"""The state manager's pure core: commits, snapshots and certifications of one subnet.

``commit(state)`` stamps ``prev_state_hash``, hashes the state incrementally and keeps the
resulting immutable ``StateTrees`` as the snapshot of that height. A certification for a
height is accepted only if it signs exactly that snapshot's certified root under the
subnet's key. The last ``keep_heights`` snapshots are kept, and always the latest
certified one, so the XNet endpoint can serve slices from it while the next round runs.
"""

from __future__ import annotations

from .certification import Certification, SignatureMemo, verify_certification
from .errors import StateManagerError
from .replicated_state import ReplicatedState
from .state_tree import StateTreeBuilder, StateTrees

__all__ = ["StateManager", "StateManagerError", "InvalidKeepHeights", "HeightMismatch", "CertificationMismatch"]


class InvalidKeepHeights(StateManagerError, ValueError):
    """``keep_heights`` is below 1."""


class HeightMismatch(StateManagerError, ValueError):
    """A commit of a height that does not follow the last committed one."""


class CertificationMismatch(StateManagerError, ValueError):
    """A certification of a height with no kept snapshot, or that signs another root than it."""


class StateManager:
    def __init__(self, state: ReplicatedState, *, keep_heights: int = 8,
                 signature_memo: SignatureMemo | None = None) -> None:
        if keep_heights < 1:
            raise InvalidKeepHeights("keep_heights must be at least 1")
        self.keep_heights = keep_heights
        self._signature_memo = signature_memo
        self._builder = StateTreeBuilder()
        self._snapshots: dict[int, StateTrees] = {}
        self._certifications: dict[int, Certification] = {}
        self._latest_certified: tuple[StateTrees, Certification] | None = None
        self._tip = state
        self._last = self._builder.update(state)
        self._snapshots[self._last.height] = self._last

    @property
    def latest_height(self) -> int:
        return self._last.height

    @property
    def latest(self) -> StateTrees:
        return self._last

    def take_tip(self) -> ReplicatedState:
        """The state of the latest height, to be advanced by the next batch (owned by the caller)."""
        return self._tip

    def commit(self, state: ReplicatedState) -> StateTrees:
        """``snapshot(h) = trees(state)`` with ``state.prev_state_hash = full_hash(h - 1)``."""
        height = state.metadata.batch_number
        if height != self._last.height + 1:
            raise HeightMismatch(f"commit of height {height} after {self._last.height}")
        state.metadata.prev_state_hash = self._last.full_hash
        trees = self._builder.update(state)
        self._tip, self._last = state, trees
        self._snapshots[height] = trees
        self._evict()
        return trees

    def snapshot(self, height: int) -> StateTrees | None:
        return self._snapshots.get(height)

    def heights(self) -> list[int]:
        return sorted(self._snapshots)

    def deliver_certification(self, certification: Certification, subnet_public_key: bytes) -> None:
        """Accept a certification of a kept height whose root matches and whose signature
        verifies; older than the latest certified one is ignored. The signature covers the root
        only; the height is authenticated by the root's match, as this node's tree of that
        height states it at ``/metadata/height`` (docs/architecture.md, *Certifications*)."""
        trees = self._snapshots.get(certification.height)
        if trees is None:
            raise CertificationMismatch(f"no snapshot kept at height {certification.height}")
        if certification.root != trees.certified_root:
            raise CertificationMismatch(f"certification of height {certification.height} signs another root")
        verify_certification(certification, subnet_public_key, memo=self._signature_memo)
        self._certifications[certification.height] = certification
        if self._latest_certified is None or certification.height > self._latest_certified[0].height:
            self._latest_certified = (trees, certification)
        self._evict()

    def latest_certified(self) -> tuple[StateTrees, Certification] | None:
        """The newest certified snapshot with its certification (what XNet serves)."""
        return self._latest_certified

    def certification(self, height: int) -> Certification | None:
        return self._certifications.get(height)

    def _evict(self) -> None:
        keep_from = self._last.height - self.keep_heights + 1
        pinned = self._latest_certified[0].height if self._latest_certified else None
        for height in [h for h in self._snapshots if h < keep_from and h != pinned]:
            del self._snapshots[height]
            self._certifications.pop(height, None)
