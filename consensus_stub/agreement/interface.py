"""The agreement protocol's surface: its configuration, what the shell injects, what it gets back.

``AgreementNode`` (``protocol``) is configured by an ``AgreementConfig``; the shell injects
``propose``/``validate`` (called with a ``BlockContext``), ``sign`` and a ``Verifier``, and
carries out the ``Output``s in order (see ``protocol``'s docstring for what each one asks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Union

from ..block import Block
from ..block_maker import ChainTip
from ..registry import SubnetRecord
from .messages import MAX_CATCH_UP_BLOCKS, AgreementError, Message

__all__ = [
    "AgreementConfig", "AgreementConfigError", "BlockContext", "Verifier", "ProposeFn", "ValidateFn",
    "compute_quorum", "Send", "Broadcast", "Persist", "Finalized", "IngressReceived", "Certified", "Refused",
    "Output",
]


class AgreementConfigError(AgreementError):
    """Parameters the protocol cannot run with."""


def compute_quorum(n: int) -> int:
    """``q = n - f`` with ``f = (n - 1) // 3``: ``2f + 1`` of ``3f + 1``. Two quorums share
    ``2q - n >= f + 1`` nodes; ``f`` nodes down still leave a quorum."""
    return n - (n - 1) // 3


@dataclass(frozen=True, slots=True)
class AgreementConfig:
    subnet: SubnetRecord
    node_id: str
    round_timeout_ns: int = 1_000_000_000
    rebroadcast_interval_ns: int = 3_000_000_000
    #: Finalized blocks kept to answer peers' catch-up (a node further behind needs state sync).
    retained_heights: int = 1_000
    #: Artifacts are kept for heights up to this far above the notarized height.
    lookahead_heights: int = 16
    max_catch_up_blocks: int = MAX_CATCH_UP_BLOCKS
    #: The least time from a round's start to its first proposal: paces an idle subnet
    #: (0: as fast as messages travel). Every rank's proposal waits this much longer.
    block_interval_ns: int = 0
    #: A peer not heard from for this long counts as absent: makers of lower rank that are
    #: absent are not waited for (0: always wait ``rank × round_timeout``).
    absent_after_ns: int = 6_000_000_000

    def __post_init__(self) -> None:
        if self.node_id not in self.subnet.node_ids:
            raise AgreementConfigError(f"{self.node_id!r} is not a node of subnet {self.subnet.subnet_id!r}")
        for name in ("round_timeout_ns", "rebroadcast_interval_ns", "retained_heights", "lookahead_heights"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise AgreementConfigError(f"{name} must be a positive int, got {value!r}")
        for name in ("block_interval_ns", "absent_after_ns"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 0:
                raise AgreementConfigError(f"{name} must be a non-negative int")
        if type(self.max_catch_up_blocks) is not int or not 1 <= self.max_catch_up_blocks <= MAX_CATCH_UP_BLOCKS:
            raise AgreementConfigError(f"max_catch_up_blocks must be in 1..{MAX_CATCH_UP_BLOCKS}")

    @property
    def quorum(self) -> int:
        return compute_quorum(self.subnet.size)


@dataclass(frozen=True, slots=True)
class BlockContext:
    """Where a block at ``height`` goes: on ``parent_hash`` (``parent`` is that block, ``None``
    for genesis), above the finalized ``tip``; ``unfinalized`` are the notarized, not yet
    finalized ancestors, oldest first (the past payloads a validator counts)."""

    height: int
    rank: int
    maker: str
    parent_hash: bytes
    parent: Optional[Block]
    unfinalized: tuple[Block, ...]
    tip: ChainTip


class Verifier(Protocol):
    def is_valid_signature(self, node_id: str, message: bytes, signature: bytes) -> bool: ...


#: ``propose(context, now) -> Block`` and ``validate(block, context, now)`` (raises ``InvalidBlock``
#: for good or ``BlockNotYetValid`` to be asked again later).
ProposeFn = Callable[[BlockContext, int], Block]
ValidateFn = Callable[[Block, BlockContext, int], None]


@dataclass(frozen=True, slots=True)
class Send:
    to: str
    message: Message


@dataclass(frozen=True, slots=True)
class Broadcast:
    """To every other node of the subnet."""

    message: Message


@dataclass(frozen=True, slots=True)
class Persist:
    """An artifact this node signed; a restarted node must get it back (``AgreementNode.restore``)."""

    message: Message


@dataclass(frozen=True, slots=True)
class Finalized:
    """The next finalized block (heights come one by one, in order). ``proof`` — the
    finalization signatures — is given for the last block of each finalization step; keep
    the latest for ``restore``."""

    block: Block
    block_hash: bytes
    proof: tuple[tuple[str, bytes], ...] = ()

    @property
    def height(self) -> int:
        return self.block.height


@dataclass(frozen=True, slots=True)
class IngressReceived:
    messages: tuple


@dataclass(frozen=True, slots=True)
class Certified:
    certification: Certification


@dataclass(frozen=True, slots=True)
class Refused:
    """A proposal ``validate`` refused for good."""

    height: int
    block_hash: bytes
    reason: str


Output = Union[Send, Broadcast, Persist, Finalized, IngressReceived, Certified, Refused]
