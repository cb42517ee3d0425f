"""A call's status as a client proves it: a read_state certificate, verified (pure).

The deterministic testnet has no HTTP, but it trusts a node no more than the agent does:

    answer = certificate_for(certified tree, certification, [/request_status/<id>], delegation)
                                                                          (the node's side)
    cert   = verify_answer_certificate(answer, root key, the subnet's key from the registry,
                                       now, max age, no rollback below the last verified height)
    status = /request_status/<id>/status, and reply or reject_code + reject_message
             (``status_from_certificate``, the agent's own reading)

— the same encoding, pruning, delegation and checks as ``Agent.request_status`` over HTTP, so a
state that does not certify what it claims fails the test here as it would fail a real client.
"""

from __future__ import annotations

from state_manager.certification import Certification, SignatureMemo
from state_manager.labeled_trie import LabeledTrie

from replica.client.agent import status_from_certificate
from replica.client.certificate import SignatureCache, VerifiedCertificate, verify_answer_certificate
from replica.ic.certificate import CertificateDelegation
from replica.node.read_state import certificate_for

__all__ = ["verified_certificate", "status_from_certificate"]


def verified_certificate(certified: LabeledTrie, certification: Certification, paths: list[list[bytes]], *,
                         subnet_id: str, public_key: bytes, now_ns: int, max_age_ns: int, min_height: int,
                         root_key: bytes | None = None, subnet_principal: bytes = b"",
                         delegation: CertificateDelegation | None = None,
                         cache: SignatureCache | None = None, memo: SignatureMemo | None = None) -> VerifiedCertificate:
    """Encode the pruned certificate of ``paths`` as a node would (with the root subnet's
    ``delegation``, if any), decode and verify it as a client: under ``root_key`` and the
    delegation, or, without one, under the subnet's ``public_key`` (a ``cache`` of
    certificates this process verified already, and the subnet's ``memo`` of the pairings its
    nodes passed, skip repeated pairings)."""
    answer = certificate_for(certified, certification, paths, delegation)
    return verify_answer_certificate(
        answer, subnet_id=subnet_id, subnet_principal=subnet_principal, is_root=False,
        root_key=root_key if root_key is not None else public_key, subnet_key=public_key, canister=None,
        now_ns=now_ns, max_age_ns=max_age_ns, min_height=min_height,
        cache=cache if cache is not None else SignatureCache(), memo=memo)
