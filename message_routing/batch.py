"""A batch: what consensus agreed the subnet processes at one height."""

from __future__ import annotations

from dataclasses import dataclass

from state_manager.messages import Ingress, SubnetId
from state_manager.streams import StreamSlice

__all__ = ["Batch"]


@dataclass(frozen=True, slots=True)
class Batch:
    """``Batch{batch_number, time, registry_version, randomness, ingress, xnet_payload}``.

    ``xnet_payload`` holds at most one (already validated and decoded) slice per peer subnet,
    as ``(subnet, slice)`` pairs sorted by subnet id.
    """

    batch_number: int
    time: int
    registry_version: int
    randomness: bytes = bytes(32)
    ingress: tuple[Ingress, ...] = ()
    xnet_payload: tuple[tuple[SubnetId, StreamSlice], ...] = ()

    def __post_init__(self) -> None:
        subnets = [subnet for subnet, _ in self.xnet_payload]
        if subnets != sorted(set(subnets)):
            raise ValueError("xnet_payload must hold at most one slice per subnet, sorted by subnet id")
