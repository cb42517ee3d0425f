"""A call's status as a client proves it: a read_state-style certificate, verified (pure).

The deterministic testnet has no HTTP, but it trusts a node no more than the agent does:

    answer = certificate_for(certified tree, certification, [/request_status/<id>])   (the node's side)
    cert   = verify_certificate(decode_certificate(answer), subnet key from the registry,
                                now, max age, no rollback below the last verified height)
    status = /request_status/<id>/status, and reply or reject_code + reject_message
             (``status_from_certificate``, the agent's own reading)

— the same encoding, pruning and checks as ``Agent.request_status`` over HTTP, so a state
that does not certify what it claims fails the test here as it would fail a real client.
"""

from __future__ import annotations

from state_manager.certification import Certification, SignatureMemo, verify_certification
from state_manager.labeled_trie import LabeledTrie

from replica.client.agent import status_from_certificate
from replica.client.certificate import VerifiedCertificate, verify_certificate
from replica.client.http_wire import decode_certificate
from replica.node.read_state import certificate_for

__all__ = ["verified_certificate", "status_from_certificate"]


def verified_certificate(certified: LabeledTrie, certification: Certification, paths: list[list[bytes]], *,
                         subnet_id: str, public_key: bytes, now_ns: int, max_age_ns: int,
                         min_height: int, memo: SignatureMemo | None = None) -> VerifiedCertificate:
    """Encode the pruned certificate of ``paths`` as a node would, decode and verify it as a
    client (a ``memo`` of signatures this process verified already skips repeated pairings)."""
    answer = certificate_for(certified, certification, paths)
    return verify_certificate(decode_certificate(answer), subnet_id=subnet_id, public_key=public_key,
                              now_ns=now_ns, max_age_ns=max_age_ns, min_height=min_height,
                              verify_signature=lambda c, k: verify_certification(c, k, memo=memo))
