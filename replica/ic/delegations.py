"""Delegation chains: one key passing its authority to sign requests on to another.

A signed delegation (the interface specification, *Authentication*) is::

    {delegation: {pubkey, expiration, targets?}, signature}
    signature = sign(previous key, "\\x1Aic-request-auth-delegation" · hash_of_map(delegation))

where the previous key is ``sender_pubkey`` for the first delegation and the ``pubkey`` of the
delegation before it otherwise; the request itself is then signed by the last ``pubkey``. A
chain is accepted only if (checked in this order, cheapest first, each with its own error):

1. it has at most 20 delegations (``TooManyDelegations``), each with at most 1000 targets
   (``TooManyDelegationTargets``; both already when the envelope is read);
2. no public key appears twice in ``sender_pubkey, pubkey_1, ..., pubkey_n``: no cycle and no
   key delegating to itself (``DelegationKeyRepeated``);
3. no delegation has expired: ``expiration >= now`` (``DelegationExpired``);
4. every delegation that names ``targets`` names the request's canister (``DelegationTargetRefused``);
5. every signature verifies under the key before it (``DelegationSignatureInvalid``).

A delegation map carries exactly those fields: the IC hashes the fields it knows, so a map with
any other field could never verify and is refused when read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import (
    DelegationExpired, DelegationKeyRepeated, DelegationSignatureInvalid, DelegationTargetRefused, MalformedEnvelope,
    MalformedSignature, TooManyDelegations, TooManyDelegationTargets,
)
from .identities import Identity
from .principal import MAX_PRINCIPAL_BYTES
from .request_id import hash_of_map
from .signatures import DELEGATION_DOMAIN, verify_signature

__all__ = [
    "MAX_DELEGATIONS", "MAX_TARGETS", "Delegation", "SignedDelegation", "sign_delegation",
    "delegations_from_value", "verify_delegation_chain",
]

MAX_DELEGATIONS = 20
MAX_TARGETS = 1000
_U64_LIMIT = 1 << 64


@dataclass(frozen=True, slots=True)
class Delegation:
    """``pubkey`` (DER) may sign until ``expiration`` (ns since 1970), for ``targets`` only if given."""

    pubkey: bytes
    expiration: int
    targets: tuple[bytes, ...] | None = None

    def to_value(self) -> dict[str, Any]:
        value: dict[str, Any] = {"pubkey": self.pubkey, "expiration": self.expiration}
        if self.targets is not None:
            value["targets"] = list(self.targets)
        return value

    def signed_payload(self) -> bytes:
        """``"\\x1Aic-request-auth-delegation" · hash_of_map(delegation)``."""
        return DELEGATION_DOMAIN + hash_of_map(self.to_value())


@dataclass(frozen=True, slots=True)
class SignedDelegation:
    delegation: Delegation
    signature: bytes

    def to_value(self) -> dict[str, Any]:
        return {"delegation": self.delegation.to_value(), "signature": self.signature}


def sign_delegation(signer: Identity, pubkey: bytes, expiration: int,
                    targets: Sequence[bytes] | None = None) -> SignedDelegation:
    """``signer`` delegates to the DER key ``pubkey`` until ``expiration``, optionally for ``targets``."""
    delegation = Delegation(pubkey, expiration, None if targets is None else tuple(targets))
    return SignedDelegation(delegation, signer.sign(delegation.signed_payload()))


def _delegation_from_value(value: object) -> SignedDelegation:
    if type(value) is not dict or set(value) != {"delegation", "signature"}:
        raise MalformedEnvelope("a signed delegation is {delegation, signature}")
    inner, signature = value["delegation"], value["signature"]
    if type(signature) is not bytes:
        raise MalformedEnvelope("a delegation's signature is a blob")
    if type(inner) is not dict or not {"pubkey", "expiration"} <= set(inner) <= {"pubkey", "expiration", "targets"}:
        raise MalformedEnvelope("a delegation is {pubkey, expiration, targets?}")
    pubkey, expiration = inner["pubkey"], inner["expiration"]
    if type(pubkey) is not bytes:
        raise MalformedEnvelope("a delegation's pubkey is a blob")
    if type(expiration) is not int or not 0 <= expiration < _U64_LIMIT:
        raise MalformedEnvelope("a delegation's expiration is a u64 of nanoseconds")
    targets = inner.get("targets")
    if targets is not None:
        if type(targets) is not list or any(type(t) is not bytes or len(t) > MAX_PRINCIPAL_BYTES for t in targets):
            raise MalformedEnvelope("a delegation's targets are an array of principals")
        if len(targets) > MAX_TARGETS:
            raise TooManyDelegationTargets(f"{len(targets)} targets; a delegation names at most {MAX_TARGETS}")
        targets = tuple(targets)
    return SignedDelegation(Delegation(pubkey, expiration, targets), signature)


def delegations_from_value(value: object) -> tuple[SignedDelegation, ...]:
    """The chain of an envelope's ``sender_delegation`` array, shapes and counts checked."""
    if type(value) is not list:
        raise MalformedEnvelope("sender_delegation is an array of signed delegations")
    if len(value) > MAX_DELEGATIONS:
        raise TooManyDelegations(f"{len(value)} delegations; a chain has at most {MAX_DELEGATIONS}")
    return tuple(_delegation_from_value(item) for item in value)


def verify_delegation_chain(sender_pubkey: bytes, chain: Sequence[SignedDelegation], *, now_ns: int,
                            target: bytes | None) -> bytes:
    """The DER key that must sign the request (``sender_pubkey`` for an empty chain), after the
    checks of the module docstring. ``target`` is the canister the request is for (``None`` if
    none: then a delegation restricted to targets does not apply)."""
    if len(chain) > MAX_DELEGATIONS:
        raise TooManyDelegations(f"{len(chain)} delegations; a chain has at most {MAX_DELEGATIONS}")
    keys = [sender_pubkey] + [signed.delegation.pubkey for signed in chain]
    if len(set(keys)) != len(keys):
        raise DelegationKeyRepeated("a public key appears twice in the delegation chain")
    for position, signed in enumerate(chain, 1):
        delegation = signed.delegation
        if delegation.expiration < now_ns:
            raise DelegationExpired(f"delegation {position} expired at {delegation.expiration} (now {now_ns})")
        if delegation.targets is not None and (target is None or target not in delegation.targets):
            raise DelegationTargetRefused(f"delegation {position} does not name the request's canister")
    for position, (signer_key, signed) in enumerate(zip(keys, chain), 1):
        try:
            valid = verify_signature(signer_key, signed.signature, signed.delegation.signed_payload())
        except MalformedSignature as exc:
            raise DelegationSignatureInvalid(f"delegation {position}: {exc}") from exc
        if not valid:
            raise DelegationSignatureInvalid(f"delegation {position} is not signed by the key before it")
    return keys[-1]
