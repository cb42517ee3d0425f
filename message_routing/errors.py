"""Message routing's errors: one root, ``MessageRoutingError``.

    MessageRoutingError
    ├── BatchError          a batch that breaks its own invariants (``batch``)
    └── StateMachineError   a batch that does not follow the state (``state_machine``)

It is a ``ValueError``: both were one before they had a common root. Bad data from other
subnets or users never raises here (docs/architecture.md, *Bad input*): it becomes a reject
signal, a synthetic reject, an ingress status or a counted drop.
"""

from __future__ import annotations

__all__ = ["MessageRoutingError"]


class MessageRoutingError(ValueError):
    """Root of every error message routing raises."""
