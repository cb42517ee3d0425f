"""What the ingress HTTP API needs of a node (``NodeBackend``), apart from the server itself
(``http_api``), so a node can make its backend without loading the web framework."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from message_routing.limits import Limits
from replica.client.answers import QueryAnswer
from replica.execution.dry_run import DryRunResult
from replica.ic.certificate import CertificateDelegation
from replica.ic.identities import Identity
from state_manager.certification import Certification
from state_manager.labeled_trie import LabeledTrie
from state_manager.messages import Ingress

from .metrics import NodeMetrics

__all__ = ["NodeBackend"]


@dataclass(frozen=True)
class NodeBackend:
    """What the API needs of a node. The callables may block (they run on the thread pool):

    * ``submit(ingress)`` admits an authenticated message or raises ``IngressRefused``;
    * ``query(canister, method, payload, caller)`` runs a query on the latest certified state
      (``NotCertifiedYet`` if there is none; ``IngressRefused`` for a canister not here or an
      argument that does not decode);
    * ``certified()`` is the latest certified tree and its certification, or ``None``;
    * ``status()`` is the node's part of ``GET /api/v2/status`` (heights, ids);
    * ``subnet_principal`` is this subnet's IC id, ``root_key()`` the root subnet's DER key;
    * ``delegation(certified)`` is the root subnet's delegation to this subnet for a certificate
      of the certified tree ``certified`` (None on the root subnet; ``DelegationUnavailable``
      while none is fetched that covers it, ``replica.node.delegation.covering``);
    * ``request_sender(request id)`` is who sent a request the node knows of (None: unknown);
      ``operators`` may read every request's status besides its sender (a testnet's operator);
    * ``metrics`` is the node's registry (none: the server keeps one of its own);
    * ``dry_run(canister, method, payload, caller)`` executes an update on a copy of the
      latest certified state, never committed (``replica.execution.dry_run``; none: the
      route answers ``not_certified_yet``);
    * ``node_signer`` is the node's Ed25519 signing identity, whose DER key the registry lists
      (``NodeRecord.signing_key``): it signs query answers (``replica.ic.query_response``:
      ``sign_query_response(outcome, request_id, clock(), node_signer)``); none: a backend
      without a node behind it (tests), which cannot sign.
    """

    subnet_id: str
    node_id: str
    limits: Limits
    submit: Callable[[Ingress], None]
    query: Callable[[int, str, bytes, bytes], QueryAnswer]
    certified: Callable[[], "tuple[LabeledTrie, Certification] | None"]
    status: Callable[[], dict]
    clock: Callable[[], int] = time.time_ns
    metrics: NodeMetrics | None = None
    dry_run: "Callable[[int, str, bytes, bytes], DryRunResult] | None" = None
    subnet_principal: bytes = b""
    root_key: Callable[[], bytes] = lambda: b""
    delegation: "Callable[[LabeledTrie], CertificateDelegation | None]" = lambda certified: None
    request_sender: Callable[[bytes], "bytes | None"] = lambda _request_id: None
    operators: frozenset[bytes] = frozenset()
    node_signer: Identity | None = None
