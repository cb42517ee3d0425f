"""Why an agent call did not give a verified answer: one ``AgentError`` subclass per cause.

=============================  ====================================================================
error                          raised when
=============================  ====================================================================
TransportError                 the node cannot be reached, times out, or answers no HTTP
  SubmissionUncertain          - no node confirmed a call; it may have been pooled (``message_id``)
UnexpectedAnswer               the node answers a status or body the API does not define
RequestRefused                 a 4xx/5xx refusal that is not an ingress refusal (``reason``, ``status``)
CanisterNotRouted              no subnet of the agent's registry covers the canister
CallRejected                   the call was answered with a reject (``code`` name, ``message``)
CallTimeout                    no certified answer within the caller's timeout
ReplyUnavailable               the certified status is ``done``: the answer is gone (expired)
QueryAnswerInvalid             a query answer is unsigned, signed by no node of the canister's subnet, or
                               its node signature does not verify (the registry holds the node keys)
CertificateInvalid             a read_state answer fails verification; one subclass per check:
  MalformedCertificate         - the answer does not decode, or a revealed leaf is not what it must be
  CertificateSignatureInvalid  - the signature does not verify under the root key and delegation (or the subnet's key)
  CertificationRollback        - its height is below one already verified for that subnet
  CertificateTooOld            - its ``/time`` is older than the agent's ``max_certificate_age_s``
  PathNotProven                - the tree neither reveals nor proves absent a path that was asked for
=============================  ====================================================================

Ingress refusals (4xx answers to ``call`` and ``query``) are raised as the node's own
``IngressRefused`` subclasses (``replica.client.refusals``), not as ``AgentError``.
"""

from __future__ import annotations

from replica.errors import ReplicaError

__all__ = [
    "AgentError", "TransportError", "SubmissionUncertain", "UnexpectedAnswer", "RequestRefused", "CanisterNotRouted", "CallRejected",
    "CallTimeout", "ReplyUnavailable", "QueryAnswerInvalid", "CertificateInvalid", "MalformedCertificate",
    "CertificateHeightMismatch", "CertificateSignatureInvalid", "CertificationRollback", "CertificateTooOld", "PathNotProven",
]


class AgentError(ReplicaError):
    """Root of the agent's errors."""


class TransportError(AgentError):
    pass


class SubmissionUncertain(TransportError):
    """No node confirmed a call: none answered, or each answered a 5xx that is no refusal of
    the call. A node that went silent may have pooled it all the same; ``message_id`` names
    the call, so its certified status tells."""

    def __init__(self, message: str, message_id: bytes = b"") -> None:
        super().__init__(message)
        self.message_id = message_id


class UnexpectedAnswer(AgentError):
    pass


class RequestRefused(AgentError):
    """The node refused a request for a reason that is not an ingress refusal."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{reason} (HTTP {status}): {message}")
        self.status, self.reason, self.message = status, reason, message


class CanisterNotRouted(AgentError):
    pass


class CallRejected(AgentError):
    """A reject answer; ``code`` is the reject code's name (``CANISTER_ERROR``, ``SYS_TRANSIENT``, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


class CallTimeout(AgentError):
    pass


class ReplyUnavailable(AgentError):
    pass


class QueryAnswerInvalid(AgentError):
    """A query answer that fails its node signature check (``replica.ic.query_response``)."""

    reason = "query_answer_invalid"


class CertificateInvalid(AgentError):
    """A certificate that fails verification; ``reason`` is the failed check's stable name."""

    reason = "certificate_invalid"


class MalformedCertificate(CertificateInvalid):
    reason = "malformed_certificate"




class CertificateHeightMismatch(CertificateInvalid):
    """The certified tree does not reveal ``/metadata/height`` as the height the certification
    claims (the signature covers only the root, so the tree authenticates the height)."""

    reason = "height_mismatch"


class CertificateSignatureInvalid(CertificateInvalid):
    reason = "invalid_signature"


class CertificationRollback(CertificateInvalid):
    reason = "height_rollback"


class CertificateTooOld(CertificateInvalid):
    reason = "too_old"


class PathNotProven(CertificateInvalid):
    reason = "path_not_proven"
