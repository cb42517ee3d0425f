"""Genesis dealt once per process and reused: threshold keys and node identities for tests.

Dealing a registry costs milliseconds per node (Shamir shares, a TLS key pair per node);
a test suite makes hundreds of testnets from a handful of (subnets, seed) shapes. The
result is immutable (a ``Registry`` and frozen ``NodeSecrets``), so sharing it between
testnets of one process changes nothing they compute — the dealing is a pure function of
the specs and the seed, and the TLS identities never reach the replicated state.
"""

from __future__ import annotations

import datetime
from functools import lru_cache

from consensus_stub.genesis import NodeSecrets, SubnetSpec, genesis_registry
from consensus_stub.registry import Registry

__all__ = ["dealt_genesis"]


@lru_cache(maxsize=32)
def dealt_genesis(specs: tuple[SubnetSpec, ...], seed: bytes) -> tuple[Registry, dict[str, NodeSecrets]]:
    """``genesis_registry(specs, seed)``, memoized; treat the secrets mapping as read-only."""
    # TLS certificates are only checked by gRPC, which the deterministic testnet never uses.
    not_before = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
    return genesis_registry(specs, seed, not_before=not_before)
