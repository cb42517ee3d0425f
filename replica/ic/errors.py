"""What the IC's wire format refuses: one class per reason, each with a stable ``reason``.

``IcFormatError`` is the room's root (a ``ReplicaError`` and a ``ValueError``). Every decoder and
verifier of ``replica.ic`` raises only these, never another exception, for any input bytes or
values (the tests fuzz each one); the one exception is the BLS variant, which lives below in
``state_manager.bls`` (the subnet's certifications use it) and raises its ``BlsError`` family
(also ``ValueError``s), re-exported here. ``reason`` is a short machine-readable code a caller can
answer with (the node's HTTP API, the agent's errors); the message says what was wrong.
"""

from __future__ import annotations

from typing import ClassVar

from replica.errors import ReplicaError
from state_manager.bls import BlsCombineError, BlsError, BlsPointError, BlsSecretKeyError

__all__ = [
    "IcFormatError",
    "CborRefused", "CborTooLarge", "CborTooDeep", "CborMalformed", "CborTrailingBytes", "CborTypeRefused",
    "UnhashableValue",
    "PrincipalError", "PrincipalTooLong", "PrincipalTextError", "PrincipalTextTooLong",
    "PrincipalTextMalformed", "PrincipalChecksumMismatch", "NotACanisterPrincipal",
    "PublicKeyError", "UnsupportedKeyScheme", "MalformedPublicKey", "SigningKeyError", "MalformedSignature",
    "EnvelopeRefused", "MalformedEnvelope", "MalformedContent", "SenderKeyMismatch",
    "AnonymousWithCredentials", "MissingCredentials", "SenderSignatureInvalid",
    "DelegationRefused", "TooManyDelegations", "DelegationExpired", "DelegationTargetRefused",
    "TooManyDelegationTargets", "DelegationKeyRepeated", "DelegationSignatureInvalid",
    "HashTreeRefused", "AnswerMalformed",
    "CertificateRefused", "CertificateMalformed", "NestedDelegation", "DelegationSubnetKeyMissing",
    "CanisterRangesMissing", "CanisterOutsideRanges", "DelegationSubnetMismatch", "CertificateSignatureRefused",
    "QueryResponseRefused", "MalformedQueryResponse", "QueryResponseUnsigned", "QuerySignerUnknown",
    "QuerySignerMismatch", "QuerySignatureInvalid",
    "BlsError", "BlsPointError", "BlsSecretKeyError", "BlsCombineError",
    "CandidError", "CandidSyntaxError", "CandidTypeError", "CandidUnsupported", "CandidMalformed",
    "CandidLimitExceeded", "CandidTypeMismatch", "CandidValueRefused",
]


class IcFormatError(ReplicaError, ValueError):
    """Bytes or values the IC interface does not allow (module docstring)."""

    reason: ClassVar[str] = "ic_format"


# -- CBOR (replica.ic.cbor) --------------------------------------------------------------------


class CborRefused(IcFormatError):
    """Bytes that are not one data item of the strict CBOR the interface uses."""

    reason = "cbor_refused"


class CborTooLarge(CborRefused):
    """More bytes than the caller's bound, refused before any parsing."""

    reason = "cbor_too_large"


class CborTooDeep(CborRefused):
    """Containers nested deeper than the bound, refused while parsing."""

    reason = "cbor_too_deep"


class CborMalformed(CborRefused):
    """Not well-formed: truncated, bad UTF-8, indefinite lengths or duplicate map keys."""

    reason = "cbor_malformed"


class CborTrailingBytes(CborRefused):
    """Bytes left after the one data item."""

    reason = "cbor_trailing_bytes"


class CborTypeRefused(CborRefused):
    """A type the interface never uses: floats, simple values, tags other than self-describe
    (outermost only) and bignums, map keys that are not text."""

    reason = "cbor_type_refused"


# -- request ids (replica.ic.request_id) -------------------------------------------------------


class UnhashableValue(IcFormatError):
    """A value with no representation-independent hash (not a nat, int, blob, text, array or
    map with text keys), or nested too deep."""

    reason = "unhashable_value"


# -- principals (replica.ic.principal) ---------------------------------------------------------


class PrincipalError(IcFormatError):
    """Not a principal."""

    reason = "principal_invalid"


class PrincipalTooLong(PrincipalError):
    """More than 29 bytes."""

    reason = "principal_too_long"


class PrincipalTextError(PrincipalError):
    """Text that is not the textual form of a principal."""

    reason = "principal_text_invalid"


class PrincipalTextTooLong(PrincipalTextError):
    """Longer than the textual form of any principal (63 characters)."""

    reason = "principal_text_too_long"


class PrincipalTextMalformed(PrincipalTextError):
    """Characters outside base32, or not grouped by five with dashes as the canonical form is."""

    reason = "principal_text_malformed"


class PrincipalChecksumMismatch(PrincipalTextError):
    """The CRC-32 in the text is not the checksum of the principal's bytes (a typo)."""

    reason = "principal_checksum_mismatch"


class NotACanisterPrincipal(PrincipalError):
    """A principal that is not a canister id (8 bytes of id, then ``0x01 0x01``)."""

    reason = "not_a_canister_principal"


# -- keys and signatures (replica.ic.public_keys, replica.ic.signatures) -----------------------


class PublicKeyError(IcFormatError):
    """A public key the interface does not accept."""

    reason = "public_key_invalid"


class UnsupportedKeyScheme(PublicKeyError):
    """A DER public key of a scheme not supported here (its algorithm is named when known)."""

    reason = "unsupported_key_scheme"


class MalformedPublicKey(PublicKeyError):
    """A key of a supported scheme whose bytes are not a valid key (length, point)."""

    reason = "malformed_public_key"


class SigningKeyError(IcFormatError):
    """Private key bytes or a seed that cannot make a signing identity."""

    reason = "signing_key_invalid"


class MalformedSignature(IcFormatError):
    """Signature bytes that cannot be a signature of the key's scheme (length, encoding)."""

    reason = "malformed_signature"


# -- envelopes and delegations (replica.ic.envelope, replica.ic.delegations) -------------------


class EnvelopeRefused(IcFormatError):
    """A request envelope that does not authenticate its content."""

    reason = "envelope_refused"


class MalformedEnvelope(EnvelopeRefused):
    """Not ``{content, sender_pubkey?, sender_sig?, sender_delegation?}`` with the right types."""

    reason = "malformed_envelope"


class MalformedContent(EnvelopeRefused):
    """A content map whose fields are missing, of the wrong type or out of bounds."""

    reason = "malformed_content"


class SenderKeyMismatch(EnvelopeRefused):
    """``sender`` is not the self-authenticating principal of ``sender_pubkey``."""

    reason = "sender_key_mismatch"


class AnonymousWithCredentials(EnvelopeRefused):
    """The anonymous sender with a public key, signature or delegations."""

    reason = "anonymous_with_credentials"


class MissingCredentials(EnvelopeRefused):
    """A non-anonymous sender without ``sender_pubkey`` or ``sender_sig``."""

    reason = "missing_credentials"


class SenderSignatureInvalid(EnvelopeRefused):
    """``sender_sig`` does not verify over ``"\\x0Aic-request" · request_id``."""

    reason = "sender_signature_invalid"


class DelegationRefused(EnvelopeRefused):
    """A delegation chain that does not pass signing authority on."""

    reason = "delegation_refused"


class TooManyDelegations(DelegationRefused):
    """A chain longer than 20 delegations."""

    reason = "too_many_delegations"


class DelegationExpired(DelegationRefused):
    """A delegation whose ``expiration`` is before ``now``."""

    reason = "delegation_expired"


class DelegationTargetRefused(DelegationRefused):
    """A delegation restricted to ``targets`` that do not include the request's canister."""

    reason = "delegation_target_refused"


class TooManyDelegationTargets(DelegationRefused):
    """A delegation with more than 1000 targets."""

    reason = "too_many_delegation_targets"


class DelegationKeyRepeated(DelegationRefused):
    """A public key that appears twice in the chain (a cycle, or a key delegating to itself)."""

    reason = "delegation_key_repeated"


class DelegationSignatureInvalid(DelegationRefused):
    """A delegation not signed by the key before it in the chain."""

    reason = "delegation_signature_invalid"


# -- hash trees (replica.ic.hash_tree_cbor) ----------------------------------------------------


class HashTreeRefused(IcFormatError):
    """A CBOR value that is not a hash tree in the IC's encoding."""

    reason = "hash_tree_refused"


# -- certificates (replica.ic.certificate, replica.ic.canister_ranges) -------------------------


class AnswerMalformed(IcFormatError):
    """A node's answer body that is not the interface's CBOR answer it claims to be."""

    reason = "answer_malformed"


class CertificateRefused(IcFormatError):
    """A certificate that does not verify under the root key."""

    reason = "certificate_refused"


class CertificateMalformed(CertificateRefused):
    """Not ``{tree, signature, delegation?}`` with the right types, or a value inside it
    (a public key, canister ranges, the time) that does not decode."""

    reason = "certificate_malformed"


class NestedDelegation(CertificateRefused):
    """A delegation's certificate that carries a delegation itself."""

    reason = "nested_delegation"


class DelegationSubnetKeyMissing(CertificateRefused):
    """A delegation whose certificate does not reveal ``/subnet/<subnet_id>/public_key``."""

    reason = "delegation_subnet_key_missing"


class CanisterRangesMissing(CertificateRefused):
    """A delegation that reveals no canister ranges of its subnet, in either layout."""

    reason = "canister_ranges_missing"


class CanisterOutsideRanges(CertificateRefused):
    """A canister the delegated subnet may not certify for."""

    reason = "canister_outside_ranges"


class DelegationSubnetMismatch(CertificateRefused):
    """A delegation to another subnet than the one asked."""

    reason = "delegation_subnet_mismatch"


class CertificateSignatureRefused(CertificateRefused):
    """A BLS signature that does not verify over ``"\\x0Dic-state-root" · root``."""

    reason = "certificate_signature_refused"


# -- query answers signed by nodes (replica.ic.query_response) ---------------------------------


class QueryResponseRefused(IcFormatError):
    """A query answer that is not one, or whose node signatures do not authenticate it."""

    reason = "query_response_refused"


class MalformedQueryResponse(QueryResponseRefused):
    """Not ``{status, reply | reject_code, reject_message, error_code?, signatures}`` with the
    right types, or a node signature that is not ``{timestamp, signature, identity}``."""

    reason = "malformed_query_response"


class QueryResponseUnsigned(QueryResponseRefused):
    """An answer with no node signature: the interface requires at least one."""

    reason = "query_response_unsigned"


class QuerySignerUnknown(QueryResponseRefused):
    """A signature whose ``identity`` is no node whose key the verifier holds for the subnet."""

    reason = "query_signer_unknown"


class QuerySignerMismatch(QueryResponseRefused):
    """A signature whose ``identity`` is not the self-authenticating principal of the key it is
    checked under (a node's id is that principal of its signing key)."""

    reason = "query_signer_mismatch"


class QuerySignatureInvalid(QueryResponseRefused):
    """A node signature that does not verify over ``"\\x0Bic-response" · hash_of_map(response)``."""

    reason = "query_signature_invalid"


# -- Candid (replica.ic.candid) ----------------------------------------------------------------


class CandidError(IcFormatError):
    """Candid text, bytes or host values that the Candid specification does not allow."""

    reason = "candid_refused"


class CandidSyntaxError(CandidError):
    """Type text that does not parse (the position is in the message)."""

    reason = "candid_syntax"


class CandidTypeError(CandidError):
    """Parsed types that are not well-formed: an unknown or repeated name, a definition that
    is only itself, a field id repeated or not below 2^32."""

    reason = "candid_type_invalid"


class CandidUnsupported(CandidError):
    """A type this implementation does not declare or decode at: function and service
    references."""

    reason = "candid_unsupported"


class CandidMalformed(CandidError):
    """Bytes that are not a Candid message: magic, type table, argument types or values."""

    reason = "candid_malformed"


class CandidLimitExceeded(CandidError):
    """A message or value that needs more nesting or work than the bounds allow."""

    reason = "candid_limit_exceeded"


class CandidTypeMismatch(CandidError):
    """A well-formed message whose values do not coerce to the expected types."""

    reason = "candid_type_mismatch"


class CandidValueRefused(CandidError):
    """A host value that is not a value of the type it is encoded at."""

    reason = "candid_value_refused"
