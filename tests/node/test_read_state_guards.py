"""read_state's guards: the paths each route may ask for, and request statuses shown to their sender only."""

from __future__ import annotations

import pytest

from replica.client.refusals import PathNotAllowed, RequestStatusForbidden
from replica.ic.principal import canister_principal
from replica.node.read_state import check_canister_paths, check_subnet_paths

ALICE, BOB = b"\x01" * 29, b"\x02" * 29
MINE, THEIRS, UNKNOWN = b"\xaa" * 32, b"\xbb" * 32, b"\xcc" * 32
SENDERS = {MINE: ALICE, THEIRS: BOB}
CANISTER = 7
OWN = canister_principal(CANISTER).raw
SUBNET = b"\x05" * 29


def check(paths, reader=ALICE):
    check_canister_paths(paths, CANISTER, reader, SENDERS.get)


@pytest.mark.parametrize("path", [
    [b"time"], [b"canister", OWN, b"module_hash"], [b"canister", OWN, b"controllers"],
    [b"request_status", MINE], [b"request_status", MINE, b"reply"], [b"request_status", UNKNOWN, b"status"],
    [b"subnet"], [b"subnet", SUBNET], [b"subnet", SUBNET, b"public_key"], [b"subnet", SUBNET, b"node", b"n", b"public_key"],
    [b"canister_ranges", SUBNET], [b"metadata", b"height"], [b"streams", b"subnet-1", b"header"],
])
def test_allowed_paths(path):
    check([path])


@pytest.mark.parametrize("path", [
    [b"canister", canister_principal(8).raw, b"module_hash"], [b"canister", OWN, b"stable"], [b"request_status", b"x"],
    [b"metadata", b"prev_state_hash"], [b"ingress_history"], [b"time", b"x"], [b"subnet", SUBNET, b"secret"],
])
def test_other_paths_are_refused(path):
    with pytest.raises(PathNotAllowed):
        check([path])


def test_a_request_status_is_shown_to_its_sender_only():
    check([[b"request_status", MINE], [b"request_status", UNKNOWN]])
    with pytest.raises(RequestStatusForbidden):
        check([[b"request_status", MINE], [b"request_status", THEIRS, b"reply"]])
    with pytest.raises(RequestStatusForbidden):
        check([[b"request_status", MINE]], reader=BOB)


def test_a_subnet_read_state_asks_for_subnet_paths_only():
    check_subnet_paths([[b"time"], [b"subnet", SUBNET, b"public_key"], [b"canister_ranges", SUBNET]])
    for path in ([b"request_status", MINE], [b"canister", OWN, b"module_hash"]):
        with pytest.raises(PathNotAllowed):
            check_subnet_paths([path])
