"""The root of the errors of running a replica and talking to one: ``ReplicaError``.

    ReplicaError
    ├── CanisterCodeNotFound   a canister's recorded module cannot be loaded (replica.node)
    ├── SubnetError            a subnet in one process cannot go on (replica.testnet.subnet)
    ├── TestnetError           a testnet directory or one of its processes is unusable
    │                          (replica.testnet.launcher)
    ├── IngressRefused         a submission the replica refuses, one subclass per reason
    │                          (replica.client.refusals)
    ├── ApiError               a request the ingress HTTP API refuses for another reason
    │                          (replica.node.api_errors)
    ├── IdentityError          the identity store refuses a name or a key file
    │                          (replica.client.identities)
    └── AgentError             a call through the agent without a verified answer
                               (replica.client.agent_errors)

Each keeps the built-in class it had before it had this root (``LookupError``,
``RuntimeError``, ``ValueError``). The deterministic rooms keep their own roots:
``replica.execution.errors`` and ``replica.audit.errors.AuditError``.
"""

from __future__ import annotations

__all__ = ["ReplicaError"]


class ReplicaError(Exception):
    """Root of the errors of replica.node, replica.testnet and replica.client."""
