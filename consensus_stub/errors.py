"""The consensus stub's errors: one root, ``ConsensusError``.

Each module keeps its own family under it:

    ConsensusError
    ├── BlockError        block encoding (MalformedBlock); the notary's InvalidBlock (permanent)
    │                     and BlockNotYetValid (transient); the block store's ChainError and
    │                     BlockStoreError (CorruptBlockLog, UnsupportedBlockLog, BlockLogBehind)
    ├── RegistryError     MalformedRegistry, InconsistentRegistry, UnknownRegistryVersion
    ├── GenesisError      specifications that cannot make a registry, unreadable node secrets
    └── NodeKeyError      invalid node identity inputs

It is a ``ValueError``: every family was one before it had a common root.
"""

from __future__ import annotations

__all__ = ["ConsensusError"]


class ConsensusError(ValueError):
    """Root of every error the consensus stub raises."""
