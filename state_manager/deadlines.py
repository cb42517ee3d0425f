"""Deadlines of bounded-wait calls: whole seconds since the epoch, 0 for guaranteed-response.

A bounded-wait ("best-effort") call carries its deadline on the request and on its response.
The deadline is coarse (whole seconds, like the IC's ``CoarseTime``) so it encodes small and
every subnet compares it with its own batch time by the same rule, ``is_expired``.
"""

from __future__ import annotations

__all__ = ["NO_DEADLINE", "MAX_CALL_TIMEOUT_S", "SECOND_NS", "DeadlineError", "compute_call_deadline",
           "is_expired", "deadline_ns"]

from .errors import StateManagerError

#: The deadline of a guaranteed-response call: none.
NO_DEADLINE = 0
#: The longest timeout a bounded-wait call may ask for.
MAX_CALL_TIMEOUT_S = 300
SECOND_NS = 1_000_000_000


class DeadlineError(StateManagerError, ValueError):
    """A timeout that is not a whole number of seconds ≥ 1."""


def compute_call_deadline(now_ns: int, timeout_s: int) -> int:
    """``deadline = ⌊now / 1 s⌋ + min(timeout_s, MAX_CALL_TIMEOUT_S)`` (whole seconds).

    ``timeout_s`` must be an int ≥ 1: a deadline is never 0 (that means no deadline)."""
    if type(timeout_s) is not int or timeout_s < 1:
        raise DeadlineError(f"a call timeout is a whole number of seconds >= 1, not {timeout_s!r}")
    return now_ns // SECOND_NS + min(timeout_s, MAX_CALL_TIMEOUT_S)


def is_expired(deadline: int, now_ns: int) -> bool:
    """``deadline ≠ 0 ∧ deadline < ⌊now / 1 s⌋``: the deadline lies in a whole second that
    has fully passed (the IC compares coarse times the same way). Guaranteed-response
    messages (deadline 0) never expire."""
    return deadline != NO_DEADLINE and deadline < now_ns // SECOND_NS


def deadline_ns(deadline: int) -> int:
    """The deadline in nanoseconds, as ``Canister.deadline`` shows it (0 stays 0)."""
    return deadline * SECOND_NS
