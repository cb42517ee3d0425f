"""A call's status as a client proves it: a read_state-style certificate, verified (pure).

The deterministic testnet has no HTTP, but it trusts a node no more than the agent does:

    answer = certificate_for(certified tree, certification, [/request_status/<id>])   (the node's side)
    cert   = verify_certificate(decode_certificate(answer), subnet key from the registry,
                                now, max age, no rollback below the last verified height)
    status = /request_status/<id>/status, and reply or reject_code + reject_message

— the same encoding, pruning and checks as ``Agent.request_status`` over HTTP, so a state
that does not certify what it claims fails the test here as it would fail a real client.
"""

from __future__ import annotations

from state_manager.certification import Certification
from state_manager.labeled_trie import LabeledTrie

from replica.client.agent import STATUSES, RequestStatus, reject_code_name
from replica.client.agent_errors import MalformedCertificate
from replica.client.certificate import VerifiedCertificate, verify_certificate
from replica.client.http_wire import decode_certificate
from replica.node.read_state import certificate_for

__all__ = ["verified_certificate", "status_from_certificate"]


def verified_certificate(certified: LabeledTrie, certification: Certification, paths: list[list[bytes]], *,
                         subnet_id: str, public_key: bytes, now_ns: int, max_age_ns: int,
                         min_height: int) -> VerifiedCertificate:
    """Encode the pruned certificate of ``paths`` as a node would, decode and verify it as a client."""
    answer = certificate_for(certified, certification, paths)
    return verify_certificate(decode_certificate(answer), subnet_id=subnet_id, public_key=public_key,
                              now_ns=now_ns, max_age_ns=max_age_ns, min_height=min_height)


def status_from_certificate(certificate: VerifiedCertificate, message_id: bytes) -> RequestStatus:
    """The certified status of ``message_id`` (``unknown`` when the tree proves it absent)."""
    prefix = [b"request_status", message_id]
    status = certificate.lookup_value(prefix + [b"status"])
    if status is None:
        return RequestStatus(message_id, "unknown", certificate)
    if status not in STATUSES[1:]:
        raise MalformedCertificate(f"unknown request status {status!r}")
    if status == "replied":
        reply = certificate.lookup_value(prefix + [b"reply"])
        if not isinstance(reply, bytes):
            raise MalformedCertificate("a replied status without reply bytes")
        return RequestStatus(message_id, status, certificate, reply=reply)
    if status == "rejected":
        code = certificate.lookup_value(prefix + [b"reject_code"])
        message = certificate.lookup_value(prefix + [b"reject_message"])
        if type(code) is not int or not isinstance(message, str):
            raise MalformedCertificate("a rejected status without reject code and message")
        return RequestStatus(message_id, status, certificate, reject_code=reject_code_name(code),
                             reject_message=message)
    return RequestStatus(message_id, status, certificate)
