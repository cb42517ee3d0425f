"""The app developer's Python API: a multi-subnet testnet in a test, and a pytest plugin.

* ``testnet``          ``Testnet`` — deterministic (in-process, ``tick()``-driven) or live
  (``replica testnet up``), ``Testnet.connect(DIR)``; the same calls in both modes
* ``deterministic``    the in-process network: the replica's subnets without sockets, threads or wall clock
* ``live``             the same methods over a ``replica testnet`` directory and the agent
* ``inprocess_xnet``   certified slices pulled from a peer's slice provider without gRPC
* ``certified_status`` a call's status read from a verified read_state-style certificate
* ``canister_source``  what ``install`` sends: a canister module's source and class name
* ``clock``            the deterministic clock; ``genesis_cache``: genesis dealt once per process
* ``pytest_plugin``    ``testnet`` / ``live_testnet`` fixtures and ``--replica-seed`` (entry point ``pytest11``)
* ``RawPayload``       an argument sent as its bytes (a Candid message); Candid replies come back as one
* ``errors``           ``TestingError`` and its subclasses; ``CallRejected`` (``.code``, ``.message``)
"""

from replica.client.identity import Ed25519Identity, Identity, Secp256k1Identity
from replica.client.management import CanisterLogRecord
from replica.execution.codec import RawPayload

from .errors import (
    CallNotAnswered, CallRejected, CanisterSourceError, NotInThisMode, TestingError, TimeRegression, UnknownMessage,
    UnknownNode, UnknownSubnet,
)
from .testnet import DEFAULT_MAX_TICKS, SubnetInfo, Testnet, seed_bytes

__all__ = [
    "Testnet", "SubnetInfo", "Identity", "Ed25519Identity", "Secp256k1Identity", "CallRejected", "TestingError",
    "CallNotAnswered", "NotInThisMode",
    "UnknownSubnet", "UnknownNode", "UnknownMessage", "CanisterSourceError", "TimeRegression", "DEFAULT_MAX_TICKS",
    "seed_bytes", "CanisterLogRecord", "RawPayload",
]
