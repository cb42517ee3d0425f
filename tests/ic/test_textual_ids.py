"""Canister ids as people read and type them: textual principals, decimal ids, refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replica.ic.textual_ids import MANAGEMENT_CANISTER_TEXT, canister_text, parse_canister, subnet_text
from replica.ic.errors import NotACanisterPrincipal, PrincipalChecksumMismatch, PrincipalTextError
from replica.ic.principal import canister_principal
from state_manager.messages import MANAGEMENT_CANISTER_ID


@pytest.mark.parametrize("number, text", [
    (0, "rwlgt-iiaaa-aaaaa-aaaaa-cai"),
    (1, "rrkah-fqaaa-aaaaa-aaaaq-cai"),
    (2, "ryjl3-tyaaa-aaaaa-aaaba-cai"),
    (MANAGEMENT_CANISTER_ID, "aaaaa-aa"),
])
def test_vectors(number, text):
    assert canister_text(number) == text
    assert parse_canister(text) == number
    assert parse_canister(text.upper()) == number


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_text_and_decimal_name_the_same_canister(number):
    assert parse_canister(canister_text(number)) == number
    assert parse_canister(str(number)) == number == parse_canister(number)


def test_the_management_canister_has_one_name():
    assert MANAGEMENT_CANISTER_TEXT == canister_text(MANAGEMENT_CANISTER_ID)
    with pytest.raises(NotACanisterPrincipal, match="aaaaa-aa"):
        parse_canister(canister_principal(MANAGEMENT_CANISTER_ID).to_text())


def test_a_typo_is_refused_by_the_checksum():
    with pytest.raises(PrincipalChecksumMismatch, match="checksum"):
        parse_canister("rwlgt-iiaab-aaaaa-aaaaa-cai")


@pytest.mark.parametrize("bad, error, words", [
    ("hello", PrincipalTextError, "decimal number"),
    ("", PrincipalTextError, "decimal number"),
    ("-1", NotACanisterPrincipal, "u64"),
    (str(1 << 64), NotACanisterPrincipal, "u64"),
    ("2vxsx-fae", NotACanisterPrincipal, "not a canister id"),    # the anonymous principal
    ("em77e-bvlzu-aq", NotACanisterPrincipal, "not a canister id"),
    (1 << 64, NotACanisterPrincipal, "u64"),
    (True, NotACanisterPrincipal, "bool"),
    (1.0, NotACanisterPrincipal, "float"),
])
def test_refusals_say_what_was_wrong(bad, error, words):
    with pytest.raises(error, match=words):
        parse_canister(bad)


@pytest.mark.parametrize("bad", [-1, 1 << 64, "7", None, True])
def test_only_u64s_have_a_text(bad):
    with pytest.raises(NotACanisterPrincipal):
        canister_text(bad)


def test_a_subnets_text_is_the_principal_of_its_keys_der():
    from replica.ic.bls import deal_threshold_keys, public_key_to_der
    from replica.ic.principal import Principal, self_authenticating

    key = deal_threshold_keys(4, 3, b"\x07" * 32).public_key
    text = subnet_text(key)
    assert text == str(self_authenticating(public_key_to_der(key)))
    assert Principal.from_text(text).raw.endswith(b"\x02")
