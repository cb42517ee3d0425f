"""What can go wrong in ``replica.testing``: one root class, one subclass per cause.

``CallRejected`` is the client's own (``replica.client.agent_errors``): an update or query
answered with a reject, in both modes, with ``.code`` (``"CANISTER_ERROR"``, …) and
``.message``. A call the node refuses outright raises the client's ``IngressRefused``
subclass (``replica.client.refusals``), as ``replica call`` would.
"""

from __future__ import annotations

from replica.client.agent_errors import CallRejected
from replica.errors import ReplicaError

__all__ = [
    "CallRejected", "TestingError", "UnknownSubnet", "UnknownNode", "UnknownMessage", "CallNotAnswered",
    "NotInThisMode", "CanisterSourceError", "TimeRegression",
]


class TestingError(ReplicaError):
    """The root of ``replica.testing``'s own errors."""

    __test__ = False  # not a pytest test class, despite the name


class UnknownSubnet(TestingError, LookupError):
    """No subnet of this testnet has that name."""


class UnknownNode(TestingError, LookupError):
    """No node of this testnet has that id."""


class UnknownMessage(TestingError, LookupError):
    """A message id this testnet did not submit (it cannot tell which subnet to ask)."""


class CallNotAnswered(TestingError, TimeoutError):
    """A call is still unanswered after ``max_ticks`` rounds (or the live timeout)."""


class NotInThisMode(TestingError):
    """The method exists only in the other mode (e.g. ``set_time`` on a live testnet)."""


class CanisterSourceError(TestingError, ValueError):
    """``install`` got something that is neither a canister class nor source with a class name."""


class TimeRegression(TestingError, ValueError):
    """``set_time`` / ``advance_time`` would move time backwards (batch time never regresses)."""
