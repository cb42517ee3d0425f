"""Delegation chains as Internet-Identity-style sessions use them: every rule, every refusal typed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica.ic import cbor
from replica.ic.delegations import (
    MAX_DELEGATIONS, Delegation, SignedDelegation, delegations_from_value, sign_delegation, verify_delegation_chain,
)
from replica.ic.envelope import Envelope, authenticate, decode_envelope, encode_envelope, sign_envelope
from replica.ic.errors import (
    DelegationExpired, DelegationKeyRepeated, DelegationSignatureInvalid, DelegationTargetRefused, IcFormatError,
    MalformedEnvelope, SenderKeyMismatch, SenderSignatureInvalid, TooManyDelegations, TooManyDelegationTargets,
)
from replica.ic.identities import Ed25519Identity, Secp256k1Identity
from replica.ic.principal import canister_principal
from replica.ic.request_id import hash_of_map
from replica.ic.signatures import DELEGATION_DOMAIN

NOW = 1_700_000_000_000_000_000
LATER = NOW + 3_600_000_000_000
LIMIT = 1 << 20
CANISTER = canister_principal(7).raw
OTHER_CANISTER = canister_principal(8).raw

USER = Ed25519Identity.from_seed(b"user")               # the long-lived key (the sender)
SESSION = Secp256k1Identity.from_seed(b"session")       # the key the browser holds


def session_envelope(chain, signer=SESSION, *, sender=USER):
    content = {"request_type": "call", "sender": sender.principal.raw, "ingress_expiry": NOW,
               "canister_id": CANISTER, "method_name": "inc", "arg": b""}
    return sign_envelope(content, signer, sender_pubkey=sender.der_public_key, delegations=chain)


def chain_of(length, *, expiration=LATER, targets=None):
    """USER → k1 → ... → k_length, the last key ``signers[-1]``."""
    signers = [USER] + [Ed25519Identity.from_seed(bytes([i])) for i in range(1, length + 1)]
    chain = [sign_delegation(a, b.der_public_key, expiration, targets) for a, b in zip(signers, signers[1:])]
    return chain, signers[-1]


def test_the_delegation_signature_covers_the_specifications_payload():
    signed = sign_delegation(USER, SESSION.der_public_key, LATER, [CANISTER])
    payload = DELEGATION_DOMAIN + hash_of_map({"pubkey": SESSION.der_public_key, "expiration": LATER,
                                               "targets": [CANISTER]})
    assert signed.delegation.signed_payload() == payload and len(DELEGATION_DOMAIN) == 27
    assert USER.sign(payload) == signed.signature


def test_a_session_delegation_authenticates_the_user_through_the_wire():
    envelope = session_envelope([sign_delegation(USER, SESSION.der_public_key, LATER)])
    decoded = decode_envelope(encode_envelope(envelope), max_bytes=LIMIT)
    assert decoded == envelope
    assert authenticate(decoded, now_ns=NOW).sender == USER.principal


def test_twenty_delegations_pass_and_twenty_one_are_refused():
    chain, last = chain_of(MAX_DELEGATIONS)
    assert authenticate(session_envelope(chain, last), now_ns=NOW).sender == USER.principal
    chain, last = chain_of(MAX_DELEGATIONS + 1)
    with pytest.raises(TooManyDelegations):
        authenticate(session_envelope(chain, last), now_ns=NOW)
    with pytest.raises(TooManyDelegations):   # already when the body is read
        decode_envelope(encode_envelope(session_envelope(chain, last)), max_bytes=LIMIT)


def test_expiry_is_checked_against_now():
    chain, last = chain_of(2, expiration=NOW)
    assert authenticate(session_envelope(chain, last), now_ns=NOW).sender == USER.principal
    with pytest.raises(DelegationExpired):
        authenticate(session_envelope(chain, last), now_ns=NOW + 1)


def test_targets_restrict_the_canisters():
    chain, last = chain_of(1, targets=[OTHER_CANISTER, CANISTER])
    assert authenticate(session_envelope(chain, last), now_ns=NOW).sender == USER.principal
    chain, last = chain_of(1, targets=[OTHER_CANISTER])
    with pytest.raises(DelegationTargetRefused):
        authenticate(session_envelope(chain, last), now_ns=NOW)
    # An explicit target (the effective canister id) overrides the content's canister.
    assert authenticate(session_envelope(chain, last), now_ns=NOW, target=OTHER_CANISTER)


def test_a_read_state_without_target_is_refused_by_a_restricted_delegation():
    chain, last = chain_of(1, targets=[CANISTER])
    content = {"request_type": "read_state", "sender": USER.principal.raw, "ingress_expiry": NOW, "paths": []}
    envelope = sign_envelope(content, last, sender_pubkey=USER.der_public_key, delegations=chain)
    with pytest.raises(DelegationTargetRefused):
        authenticate(envelope, now_ns=NOW)
    assert authenticate(envelope, now_ns=NOW, target=CANISTER).sender == USER.principal


def test_more_than_1000_targets_are_refused_when_read():
    chain, last = chain_of(1, targets=[CANISTER] * 1001)
    with pytest.raises(TooManyDelegationTargets):
        decode_envelope(encode_envelope(session_envelope(chain, last)), max_bytes=LIMIT)


def test_cycles_and_self_delegation_are_refused():
    self_delegation = [sign_delegation(USER, USER.der_public_key, LATER)]
    with pytest.raises(DelegationKeyRepeated):
        authenticate(session_envelope(self_delegation, USER), now_ns=NOW)
    a = Ed25519Identity.from_seed(b"a")
    cycle = [sign_delegation(USER, a.der_public_key, LATER), sign_delegation(a, USER.der_public_key, LATER)]
    with pytest.raises(DelegationKeyRepeated):
        authenticate(session_envelope(cycle, USER), now_ns=NOW)


def test_a_delegation_not_signed_by_the_previous_key_is_refused():
    intruder = Ed25519Identity.from_seed(b"intruder")
    with pytest.raises(DelegationSignatureInvalid):
        authenticate(session_envelope([sign_delegation(intruder, SESSION.der_public_key, LATER)]), now_ns=NOW)
    signed = sign_delegation(USER, SESSION.der_public_key, LATER)
    stretched = SignedDelegation(Delegation(signed.delegation.pubkey, LATER + 1), signed.signature)
    with pytest.raises(DelegationSignatureInvalid):
        authenticate(session_envelope([stretched]), now_ns=NOW)
    with pytest.raises(DelegationSignatureInvalid):
        authenticate(session_envelope([SignedDelegation(signed.delegation, b"short")]), now_ns=NOW)


def test_the_request_must_be_signed_by_the_last_key():
    chain = [sign_delegation(USER, SESSION.der_public_key, LATER)]
    with pytest.raises(SenderSignatureInvalid):
        authenticate(session_envelope(chain, USER), now_ns=NOW)


def test_the_sender_is_the_chains_first_key():
    """A session key cannot stand in for the user at the chain's start."""
    chain = [sign_delegation(USER, SESSION.der_public_key, LATER)]
    honest = session_envelope(chain)
    posing = Envelope(honest.content, SESSION.der_public_key, honest.sender_sig, honest.sender_delegation)
    with pytest.raises(SenderKeyMismatch):
        authenticate(posing, now_ns=NOW)


def test_an_empty_chain_is_the_plain_key():
    assert verify_delegation_chain(USER.der_public_key, (), now_ns=NOW, target=None) == USER.der_public_key


@pytest.mark.parametrize("value", [
    {}, [{}], [{"delegation": {}, "signature": b""}], [{"delegation": {"pubkey": b"k"}, "signature": b""}],
    [{"delegation": {"pubkey": b"k", "expiration": -1}, "signature": b""}],
    [{"delegation": {"pubkey": b"k", "expiration": 1 << 64}, "signature": b""}],
    [{"delegation": {"pubkey": "k", "expiration": 1}, "signature": b""}],
    [{"delegation": {"pubkey": b"k", "expiration": 1}, "signature": "sig"}],
    [{"delegation": {"pubkey": b"k", "expiration": 1, "targets": b"x"}, "signature": b""}],
    [{"delegation": {"pubkey": b"k", "expiration": 1, "targets": [bytes(30)]}, "signature": b""}],
    [{"delegation": {"pubkey": b"k", "expiration": 1, "senders": []}, "signature": b""}],
    [{"delegation": {"pubkey": b"k", "expiration": 1}, "signature": b"", "extra": 0}],
])
def test_malformed_delegations_are_refused(value):
    with pytest.raises(MalformedEnvelope):
        delegations_from_value(value)


@given(st.data())
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
def test_hostile_chains_raise_only_typed_refusals(data):
    """Chains built of real and fake keys, signatures, expirations and targets, in any order."""
    identities = [USER, SESSION, Ed25519Identity.from_seed(b"k"), Secp256k1Identity.from_seed(b"k")]
    keys = st.sampled_from([i.der_public_key for i in identities] + [b"", b"\x30\x03junk", bytes(44)])
    links = st.builds(
        lambda signer, key, expiration, targets, forge: (
            SignedDelegation(Delegation(key, expiration, targets), forge) if forge is not None
            else sign_delegation(signer, key, expiration, targets)),
        st.sampled_from(identities), keys, st.sampled_from([0, NOW, LATER, (1 << 64) - 1]),
        st.none() | st.lists(st.sampled_from([CANISTER, OTHER_CANISTER, b""]), max_size=3).map(tuple),
        st.none() | st.binary(max_size=70))
    chain = data.draw(st.lists(links, max_size=4))
    signer = data.draw(st.sampled_from(identities))
    envelope = session_envelope(chain, signer)
    try:
        decoded = decode_envelope(encode_envelope(envelope), max_bytes=LIMIT)
        authenticate(decoded, now_ns=NOW)
    except IcFormatError:
        pass


def test_cbor_value_of_a_chain_round_trips():
    chain, _ = chain_of(3, targets=[CANISTER])
    value = [signed.to_value() for signed in chain]
    assert delegations_from_value(cbor.decode(cbor.encode(value), max_bytes=LIMIT)) == tuple(chain)
    assert Envelope({}).sender_delegation is None
