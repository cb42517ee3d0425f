"""Principals: the classes of ids, the textual form both ways, vectors from the IC."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.ic.errors import (
    MalformedPublicKey, NotACanisterPrincipal, PrincipalChecksumMismatch, PrincipalError, PrincipalTextError,
    PrincipalTextMalformed, PrincipalTextTooLong, PrincipalTooLong,
)
from replica.ic.principal import (
    MAX_TEXT_LENGTH, Principal, canister_number, canister_principal, node_principal, principal_from_text,
    principal_to_text, self_authenticating, subnet_principal,
)

#: The IC's root public key (DER), as IC agents ship it.
IC_ROOT_KEY = bytes.fromhex(
    "308182301d060d2b0601040182dc7c0503010201060c2b0601040182dc7c05030201036100814c0e6ec71fab583b08bd8137"
    "3c255c3c371b2e84863c98a4f1e08b74235d14fb5d9c0cd546d9685f913a0c0b2cc5341583bf4b4392e467db96d65b9bb4cb"
    "717112f8472e0d5a4d14505ffd7484b01291091c5f87b98883463f98091a0baaae")


@pytest.mark.parametrize("raw, text", [
    (bytes.fromhex("ABCD01"), "em77e-bvlzu-aq"),            # the specification's example
    (b"", "aaaaa-aa"),                                      # the management canister
    (b"\x04", "2vxsx-fae"),                                 # the anonymous principal
    (bytes.fromhex("00000000000000000101"), "rwlgt-iiaaa-aaaaa-aaaaa-cai"),   # the NNS registry
    (bytes.fromhex("00000000000000010101"), "rrkah-fqaaa-aaaaa-aaaaq-cai"),   # NNS governance
    (bytes.fromhex("00000000000000020101"), "ryjl3-tyaaa-aaaaa-aaaba-cai"),   # the ICP ledger
])
def test_textual_form_vectors(raw, text):
    assert principal_to_text(raw) == text
    assert principal_from_text(text) == raw
    assert principal_from_text(text.upper()) == raw    # parsed case-insensitively


def test_the_root_subnets_id_is_its_keys_self_authenticating_id():
    assert str(subnet_principal(IC_ROOT_KEY)) == "tdb26-jop6k-aogll-7ltgs-eruif-6kk7m-qpktf-gdiqx-mxtrf-vb5e6-eqe"


def test_a_nodes_id_is_its_signing_keys_self_authenticating_id():
    """A mainnet node and its Ed25519 key, as a certificate in @dfinity/agent's tests states them."""
    key = bytes.fromhex("302a300506032b65700321005b0bdf0329932ab0a78fa7192ad76cf37d67eb2024739774d3b67da7799ebc9c")
    assert str(node_principal(key)) == "djil5-54fkt-55svu-26a7h-ttflx-dqn6u-3w3j6-zyuwg-cfwuo-7oi46-uae"


def test_self_authenticating_is_sha224_then_0x02():
    principal = self_authenticating(b"some der key")
    assert len(principal.raw) == 29 and principal.raw.endswith(b"\x02")
    with pytest.raises(MalformedPublicKey):
        self_authenticating("not bytes")  # type: ignore[arg-type]


def test_canister_principals():
    assert canister_principal(1234).raw == bytes.fromhex("00000000000004D20101")
    assert canister_number(Principal.from_text("ryjl3-tyaaa-aaaaa-aaaba-cai")) == 2
    for bad in (Principal.anonymous(), Principal(b""), Principal(bytes(8) + b"\x01\x02")):
        with pytest.raises(NotACanisterPrincipal):
            canister_number(bad)
    for bad_number in (-1, 1 << 64, True, "1"):
        with pytest.raises(NotACanisterPrincipal):
            canister_principal(bad_number)


@given(st.integers(0, (1 << 64) - 1))
@settings(deadline=None)
def test_canister_numbers_round_trip_and_order_as_numbers(number):
    principal = canister_principal(number)
    assert canister_number(principal) == number
    assert canister_principal(max(number - 1, 0)) <= principal


@given(st.binary(max_size=29))
@settings(deadline=None, max_examples=500)
def test_text_round_trips(raw):
    text = principal_to_text(raw)
    assert len(text) <= MAX_TEXT_LENGTH and text == text.lower()
    assert principal_from_text(text) == raw
    assert Principal.from_text(text) == Principal(raw)


def test_principals_longer_than_29_bytes_are_refused():
    with pytest.raises(PrincipalTooLong):
        Principal(bytes(30))
    with pytest.raises(PrincipalTooLong):
        principal_to_text(bytes(30))


@pytest.mark.parametrize("text, error", [
    ("em77e-bvlzu-ab", PrincipalChecksumMismatch),
    ("em77e-bvlzu-a", PrincipalTextMalformed),          # base32 of an impossible length
    ("em77ebvlzuaq", PrincipalTextMalformed),           # not grouped
    ("em77e-bvlzu--aq", PrincipalTextMalformed),
    ("-em77e-bvlzu-aq", PrincipalTextMalformed),
    ("em77e-bvlzu-aq ", PrincipalTextMalformed),
    ("em77e-bvlz1-aq", PrincipalTextMalformed),         # 1 is not in the alphabet
    ("em77e_bvlzu_aq", PrincipalTextMalformed),
    ("", PrincipalTextMalformed),
    ("aaaa", PrincipalTextMalformed),                   # shorter than a checksum
    ("a" * 64, PrincipalTextTooLong),
    ("a" * 60, PrincipalTextTooLong),                   # 60 characters without dashes: 33 bytes
])
def test_bad_text_is_refused_with_its_type(text, error):
    with pytest.raises(error):
        principal_from_text(text)


def test_non_string_text_is_refused():
    with pytest.raises(PrincipalTextMalformed):
        principal_from_text(b"aaaaa-aa")  # type: ignore[arg-type]


@given(st.binary(max_size=29), st.data())
@settings(deadline=None, max_examples=500)
def test_every_single_character_typo_is_caught(raw, data):
    text = principal_to_text(raw)
    position = data.draw(st.sampled_from([i for i, c in enumerate(text) if c != "-"]))
    replacement = data.draw(st.sampled_from([c for c in "abcdefghijklmnopqrstuvwxyz234567" if c != text[position]]))
    with pytest.raises(PrincipalTextError):
        principal_from_text(text[:position] + replacement + text[position + 1:])


@given(st.text(max_size=80))
@settings(deadline=None, max_examples=1000)
def test_any_text_parses_or_is_refused_with_a_type(text):
    try:
        raw = principal_from_text(text)
    except PrincipalError:
        return
    assert principal_to_text(raw) == text.lower()
