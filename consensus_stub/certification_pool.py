"""Collect certification shares per height; aggregate once ``t`` valid ones agree (pure).

Shares are keyed by ``(height, node index)``: a node's later share for the same height is
ignored. When some state root at a height has ``t`` shares, they are combined and the result
checked once under the subnet key (``combine_unverified``: one pairing check, the common case);
if it does not verify, they are handed to ``aggregate_certification`` (which verifies each one
against the node's public key share and drops bad ones); if fewer than ``t`` are valid, the
pool waits for more. A certification,
once made, is kept until ``purge_below``.
"""

from __future__ import annotations

from state_manager.certification import (
    Certification, CertificationError, CertificationShare, NotEnoughValidShares, SignatureMemo,
    aggregate_certification, combine_unverified,
)

from .registry import SubnetRecord

__all__ = ["CertificationPool"]


class CertificationPool:
    """Shares and certifications of one subnet."""

    def __init__(self, subnet: SubnetRecord, memo: SignatureMemo | None = None) -> None:
        self._subnet = subnet
        self._memo = memo   # shares and certifications already verified in this process
        self._key_shares = subnet.key_shares_by_index()
        self._shares: dict[int, dict[int, CertificationShare]] = {}   # height -> node index -> share
        self._certifications: dict[int, Certification] = {}
        self.invalid_shares = 0

    def add_share(self, share: CertificationShare) -> Certification | None:
        """Add ``share``; return the height's certification if it exists now."""
        done = self._certifications.get(share.height)
        if done is not None:
            return done
        if share.node_index not in self._key_shares:
            self.invalid_shares += 1
            return None
        at_height = self._shares.setdefault(share.height, {})
        if share.node_index in at_height:
            return None
        at_height[share.node_index] = share
        same_root = [s for s in at_height.values() if s.root == share.root]
        if len(same_root) < self._subnet.threshold:
            return None
        # optimistic: t shares combined and checked once; only if that fails, each share
        certification = combine_unverified(same_root, self._subnet.threshold, self._subnet.public_key, self._memo)
        try:
            if certification is None:
                certification = aggregate_certification(
                    same_root, self._subnet.threshold, self._subnet.public_key, self._key_shares, self._memo)
        except NotEnoughValidShares:
            return None
        except CertificationError:
            self.invalid_shares += 1
            return None
        self._certifications[share.height] = certification
        del self._shares[share.height]
        return certification

    def certification(self, height: int) -> Certification | None:
        return self._certifications.get(height)

    def shares_at(self, height: int) -> int:
        return len(self._shares.get(height, {}))

    def purge_below(self, height: int) -> None:
        """Forget shares and certifications of heights below ``height``."""
        for h in [h for h in self._shares if h < height]:
            del self._shares[h]
        for h in [h for h in self._certifications if h < height]:
            del self._certifications[h]
