"""A small network of our own for the interoperability tests: a root subnet and one more
subnet, each with a threshold key dealt by ``replica.ic.bls``, and the certificates they sign
through ``replica.ic.certificate``, with ``/time`` at the time the caller says (the clients
check freshness against their own clock)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from replica.ic import bls
from replica.ic.canister_ranges import encode_canister_ranges, shard_canister_ranges
from replica.ic.certificate import Certificate, encode_certificate, make_delegation, state_root_message
from replica.ic.principal import Principal, canister_principal, subnet_principal
from replica.ic.request_id import uleb128
from state_manager.hash_tree import reconstruct
from tests.ic.trees import tree_of

MINUTE_NS = 60 * 10**9
DAY_NS = 24 * 60 * MINUTE_NS


@dataclass(frozen=True)
class Subnet:
    keys: bls.ThresholdKeys

    @property
    def der_key(self) -> bytes:
        return bls.public_key_to_der(self.keys.public_key)

    @property
    def principal(self) -> Principal:
        return subnet_principal(self.der_key)

    def certify(self, tree, delegation=None) -> Certificate:
        """As the nodes do: ``t`` shares of the root's message, combined."""
        message = state_root_message(reconstruct(tree))
        shares = {i: bls.sign_share(self.keys.secret_share(i), message) for i in range(self.keys.n - self.keys.t + 1, self.keys.n + 1)}
        return Certificate(tree, bls.combine_shares(shares, self.keys.t), delegation)


ROOT = Subnet(bls.deal_threshold_keys(4, 3, b"interop root subnet key seed...."))
APP = Subnet(bls.deal_threshold_keys(7, 5, b"interop app subnet key seed....."))
OTHER_ROOT = Subnet(bls.deal_threshold_keys(1, 1, b"interop another network's root.."))
RANGES = ((canister_principal(100), canister_principal(199)), (canister_principal(1000), canister_principal(1999)))
IN_RANGE = canister_principal(150)
OUTSIDE = canister_principal(200)
REQUEST_ID = bytes(range(32))


def now_ns() -> int:
    return time.time_ns()


def answer_tree(time_ns: int):
    """What a request_status read reveals: the status and reply of one request, and ``/time``."""
    return tree_of({b"request_status": {REQUEST_ID: {b"status": b"replied", b"reply": b"DIDL\x00\x00"}},
                    b"time": uleb128(time_ns)})


def delegation_tree(time_ns: int, *, flat: bool, sharded: bool, subnet: Subnet = APP, ranges=RANGES):
    """The root subnet's word on ``subnet``: its key, and its ranges in the layouts asked for."""
    info = {b"public_key": subnet.der_key}
    if flat:
        info[b"canister_ranges"] = encode_canister_ranges(ranges)
    children = {b"subnet": {subnet.principal.raw: info}, b"time": uleb128(time_ns)}
    if sharded:
        children[b"canister_ranges"] = {subnet.principal.raw: shard_canister_ranges(ranges)}
    return tree_of(children)


def root_certificate(time_ns: int) -> bytes:
    """An answer of the root subnet: signed by the root key, no delegation."""
    return encode_certificate(ROOT.certify(answer_tree(time_ns)))


def delegated_certificate(time_ns: int, *, flat: bool = True, sharded: bool = True,
                          delegation_time_ns: int | None = None) -> bytes:
    """An answer of the app subnet, with the root subnet's delegation to it."""
    delegation = make_delegation(APP.principal, ROOT.certify(delegation_tree(
        time_ns if delegation_time_ns is None else delegation_time_ns, flat=flat, sharded=sharded)))
    return encode_certificate(APP.certify(answer_tree(time_ns), delegation))
