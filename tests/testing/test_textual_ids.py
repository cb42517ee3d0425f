"""``replica.testing`` takes a canister as an int or as its textual principal, and shows principals."""

from __future__ import annotations

import pytest

from replica.ic.errors import PrincipalChecksumMismatch
from replica.ic.textual_ids import canister_text, subnet_text
from replica.testing import Testnet, UnknownSubnet

from .apps import Greeter


def test_a_canister_by_its_principal_or_its_number():
    with Testnet(subnets=2) as net:
        a = net.install(Greeter)
        b = net.install(Greeter, subnet=net.subnets[1])
        assert type(a) is int                                    # the Python API's ids stay ints
        assert net.update_call(canister_text(a), "greet", "text") == "hello, text"
        assert net.update_call(a, "greet", "number") == "hello, number"
        assert net.query_call(canister_text(a), "greeted") == net.query_call(a, "greeted") == 2
        assert net.get_subnet(canister_text(b).upper()) == net.get_subnet(b) == net.subnets[1]
        assert net.install(Greeter, mode="upgrade", canister_id=canister_text(a)) == a
        assert net.canister_logs(canister_text(a)) == net.canister_logs(a)
        typo = canister_text(a)[:7] + ("a" if canister_text(a)[7] != "a" else "b") + canister_text(a)[8:]
        with pytest.raises(PrincipalChecksumMismatch, match="checksum"):
            net.query_call(typo, "greeted")
        with pytest.raises(UnknownSubnet, match=canister_text(10**9)):
            net.get_subnet(10**9)


def test_the_topology_shows_principals():
    with Testnet(subnets=1) as net:
        info = net.topology()[net.subnets[0]]
        assert info.principal == subnet_text(info.public_key)
        shown = repr(info)
        assert info.principal in shown and f"{canister_text(0)}..{canister_text(999)}" in shown
        assert "\\x" not in shown                                # not the key's bytes
