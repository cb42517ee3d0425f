"""Perturbations: what makes one simulated replica's replay differ from a plain one.

A perturbation is a frozen value with a canonical text form (used in reports, on the
command line and in the reproduce command)::

    none
    checkpoint@30                 start from the run's recorded checkpoint of height 30
    restart@40                    at height 40, serialize the state, reload it, go on
    shuffle:7                     containers filled in a seeded shuffled order; unordered
                                  inputs (XNet payload, canister registry) presented shuffled
    hashseed:3                    run in a process with PYTHONHASHSEED=3
    fault:flip@12:3               flip a byte of message 3 of batch 12
    fault:drop@12:3               drop message 3 of batch 12
    fault:swap@12:3:4             swap messages 3 and 4 of batch 12

Components combine with ``+`` in this order: ``checkpoint@30+restart@40+shuffle:7+hashseed:3``.
Messages of a batch are numbered ingress first (block order), then the XNet slices' messages
(subnet order, index order); see ``faults.batch_messages``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import FaultError, PerturbationError

__all__ = ["Fault", "Perturbation", "FAULT_KINDS", "NONE", "parse_perturbation", "parse_fault"]

FAULT_KINDS = ("flip", "drop", "swap")
MAX_HASH_SEED = 4_294_967_295  # the largest PYTHONHASHSEED Python accepts
_FAULT = re.compile(r"^(flip|drop|swap)@(\d+)(?::(\d+))?(?::(\d+))?$")


@dataclass(frozen=True, slots=True)
class Fault:
    """Corrupt the batch of ``height`` before the replica executes it."""

    kind: str
    height: int
    message: int = 0
    other: int | None = None  # the second message of a swap (given as None: message + 1)

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise FaultError(f"unknown fault kind {self.kind!r} (one of {', '.join(FAULT_KINDS)})")
        if type(self.height) is not int or self.height < 1:
            raise FaultError("a fault height is a batch height >= 1")
        if type(self.message) is not int or self.message < 0:
            raise FaultError("a fault message index is >= 0")
        if self.kind == "swap" and self.other is None:
            object.__setattr__(self, "other", self.message + 1)  # one canonical form
        if self.other is not None:
            if self.kind != "swap":
                raise FaultError("only a swap names a second message")
            if type(self.other) is not int or self.other < 0 or self.other == self.message:
                raise FaultError("a swap needs two different message indices")

    @property
    def second(self) -> int:
        return self.message + 1 if self.other is None else self.other

    def text(self) -> str:
        if self.kind == "swap":
            return f"swap@{self.height}:{self.message}:{self.second}"
        return f"{self.kind}@{self.height}:{self.message}"


def parse_fault(text: str) -> Fault:
    """``KIND@HEIGHT[:MESSAGE[:OTHER]]`` → ``Fault``."""
    match = _FAULT.match(text.strip())
    if match is None:
        raise FaultError(f"fault {text!r} is not KIND@HEIGHT[:MESSAGE[:OTHER]] with KIND in {FAULT_KINDS}")
    kind, height, message, other = match.groups()
    if other is not None and kind != "swap":
        raise FaultError(f"fault {text!r}: only swap takes two messages")
    return Fault(kind, int(height), int(message or 0), None if other is None else int(other))


@dataclass(frozen=True, slots=True)
class Perturbation:
    start: int = 0                   # 0 = genesis, else a recorded checkpoint height
    restart_at: int | None = None    # serialize + reload after committing this height
    shuffle_seed: int | None = None
    hash_seed: int | None = None
    fault: Fault | None = None

    def __post_init__(self) -> None:
        for name in ("start", "restart_at", "shuffle_seed", "hash_seed"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                raise PerturbationError(f"{name} must be a non-negative int, not {value!r}")
        if self.hash_seed is not None and self.hash_seed > MAX_HASH_SEED:
            raise PerturbationError(f"a hash seed is at most {MAX_HASH_SEED}")
        if self.restart_at is not None and self.restart_at <= self.start:
            raise PerturbationError(f"restart@{self.restart_at} must come after the start height {self.start}")
        if self.fault is not None and self.fault.height <= self.start:
            raise PerturbationError(f"a fault at height {self.fault.height} is before the start height {self.start}")

    def kinds(self) -> tuple[str, ...]:
        """The perturbation classes this replica belongs to (clusters share them)."""
        kinds = []
        if self.start:
            kinds.append("checkpoint")
        if self.restart_at is not None:
            kinds.append("restart")
        if self.shuffle_seed is not None:
            kinds.append("shuffle")
        if self.hash_seed is not None:
            kinds.append("hashseed")
        if self.fault is not None:
            kinds.append(f"fault:{self.fault.kind}")
        return tuple(kinds) or ("none",)

    def text(self) -> str:
        parts = []
        if self.start:
            parts.append(f"checkpoint@{self.start}")
        if self.restart_at is not None:
            parts.append(f"restart@{self.restart_at}")
        if self.shuffle_seed is not None:
            parts.append(f"shuffle:{self.shuffle_seed}")
        if self.hash_seed is not None:
            parts.append(f"hashseed:{self.hash_seed}")
        if self.fault is not None:
            parts.append(f"fault:{self.fault.text()}")
        return "+".join(parts) or "none"

    def __str__(self) -> str:
        return self.text()


NONE = Perturbation()

_COMPONENT = re.compile(r"^(checkpoint@|restart@|shuffle:|hashseed:|fault:)(.+)$")


def parse_perturbation(text: str) -> Perturbation:
    """The inverse of ``Perturbation.text`` (components in any order, each at most once)."""
    text = text.strip()
    if text in ("", "none"):
        return NONE
    fields: dict[str, object] = {}
    names = {"checkpoint@": "start", "restart@": "restart_at", "shuffle:": "shuffle_seed", "hashseed:": "hash_seed"}
    for part in text.split("+"):
        match = _COMPONENT.match(part.strip())
        if match is None:
            raise PerturbationError(f"perturbation component {part!r} is not one of checkpoint@H, restart@H, "
                                    "shuffle:SEED, hashseed:SEED, fault:KIND@H[:M[:M2]]")
        prefix, value = match.groups()
        name = "fault" if prefix == "fault:" else names[prefix]
        if name in fields:
            raise PerturbationError(f"perturbation {text!r} names {prefix.rstrip('@:')} twice")
        if name == "fault":
            fields[name] = parse_fault(value)
        elif value.isdigit():
            fields[name] = int(value)
        else:
            raise PerturbationError(f"{prefix}{value}: expected a non-negative integer")
    return Perturbation(**fields)  # type: ignore[arg-type]
