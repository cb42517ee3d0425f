"""The certified state tree in the IC's layout: every path and leaf read with replica.ic's
decoders, the subnet principal of a known key, and a certificate made of a witness of our tree
verified as an IC agent verifies it (docs/architecture.md, *Hash trees and the certified state*)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.ic import bls, cbor
from replica.ic.canister_ranges import decode_canister_ranges, revealed_ranges
from replica.ic.certificate import Certificate, make_delegation, state_root_message, verify_certificate
from replica.ic.errors import CanisterOutsideRanges, UnhashableValue
from replica.ic.principal import Principal, canister_principal, principal_from_text, subnet_principal
from replica.ic.request_id import decode_uleb128
from state_manager import ic_encoding
from state_manager.canister_state import CanisterState
from state_manager.encoding import decode
from state_manager.hash_tree import Absent, Found, Leaf, lookup_path, reconstruct
from state_manager.ingress_history import IngressState, IngressStatus
from state_manager.messages import MANAGEMENT_CANISTER_ID, RejectCode
from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import CanisterIdRange, NetworkTopology, RoutingTable
from state_manager.state_tree import StateTreeBuilder, build_state_trees
from state_manager.streams import Stream
from state_manager.trie_witness import plan_paths, witness_tree
from tests.builders import request
from tests.state_manager.trie_reference import trie_hash_tree

from .test_principal import IC_ROOT_KEY

ROOT, APP = "subnet-root", "subnet-app"
KEYS = {ROOT: bls.deal_threshold_keys(4, 3, b"\x01" * 32), APP: bls.deal_threshold_keys(4, 3, b"\x02" * 32)}
#: The app subnet has seven ranges (two shards of the sharded layout), the root one.
APP_RANGES = tuple((100 + 10 * i, 104 + 10 * i) for i in range(7))
TIME = 1_700_000_000_123_456_789
REPLIED, REJECTED, PROCESSING = b"\x01" * 32, b"\x02" * 32, b"\x03" * 32
CONTROLLER = b"\x11" * 29


def principal_of(subnet: str) -> Principal:
    return subnet_principal(bls.public_key_to_der(KEYS[subnet].public_key))


def topology() -> NetworkTopology:
    entries = [(CanisterIdRange(0, 99), ROOT)] + [(CanisterIdRange(lo, hi), APP) for lo, hi in APP_RANGES]
    keys = tuple((s, KEYS[s].public_key) for s in (APP, ROOT))
    return NetworkTopology(3, RoutingTable(tuple(entries)), subnet_public_keys=keys)


def app_state() -> ReplicatedState:
    s = ReplicatedState(APP, topology())
    s.metadata.batch_number, s.metadata.batch_time = 9, TIME
    installed = CanisterState(150, "tests:Noop", bytes(range(32)), controller=CONTROLLER)
    installed.certified_data = b"certified!"
    s.add_canister(installed)
    s.add_canister(CanisterState(151, "", b""))   # created, no code, no controller
    s.streams[ROOT] = Stream(begin=4, messages=[request(150, 1)], signals_end=2)
    s.ingress_history.set(REPLIED, IngressStatus(IngressState.REPLIED, 150, b"u", 5, 9, reply=b"DIDL\x00\x00"))
    s.ingress_history.set(REJECTED, IngressStatus(IngressState.REJECTED, 150, b"u", 5, 9,
                                                  reject_code=RejectCode.CANISTER_REJECT, reject_message="nö"))
    s.ingress_history.set(PROCESSING, IngressStatus(IngressState.PROCESSING, 150, b"u", 5, 9))
    return s


def root_state() -> ReplicatedState:
    s = ReplicatedState(ROOT, topology())
    s.metadata.batch_number, s.metadata.batch_time = 4, TIME - 10**9
    return s


@pytest.fixture(scope="module")
def tree():
    return trie_hash_tree(build_state_trees(app_state()).certified)


def at(tree, *path) -> bytes:
    result = lookup_path(tree, [p.encode() if isinstance(p, str) else p for p in path])
    assert isinstance(result, Found) and isinstance(result.tree, Leaf), path
    return result.tree.value


def test_time_is_a_leb128_nat(tree):
    assert decode_uleb128(at(tree, "time")) == TIME


def test_request_statuses_are_text_blobs_and_leb128_codes(tree):
    assert at(tree, "request_status", REPLIED, "status") == b"replied"
    assert at(tree, "request_status", REPLIED, "reply") == b"DIDL\x00\x00"
    assert at(tree, "request_status", REJECTED, "status") == b"rejected"
    assert decode_uleb128(at(tree, "request_status", REJECTED, "reject_code")) == 4
    assert at(tree, "request_status", REJECTED, "reject_message").decode("utf-8") == "nö"
    assert at(tree, "request_status", PROCESSING, "status") == b"processing"
    # no IC error codes here: rejects carry none
    assert isinstance(lookup_path(tree, [b"request_status", REJECTED, b"error_code"]), Absent)


def test_canisters_are_labelled_by_their_principals(tree):
    installed = canister_principal(150).raw
    assert at(tree, "canister", installed, "module_hash") == bytes(range(32))
    assert at(tree, "canister", installed, "certified_data") == b"certified!"
    assert cbor.decode(at(tree, "canister", installed, "controllers"), max_bytes=1024) == [CONTROLLER]
    empty = canister_principal(151).raw
    assert isinstance(lookup_path(tree, [b"canister", empty, b"module_hash"]), Absent)
    assert at(tree, "canister", empty, "certified_data") == b""
    assert cbor.decode(at(tree, "canister", empty, "controllers"), max_bytes=1024) == []
    assert isinstance(lookup_path(tree, [b"canister", canister_principal(MANAGEMENT_CANISTER_ID).raw]), Absent)
    assert isinstance(lookup_path(tree, [b"canister", (150).to_bytes(8, "big")]), Absent)


def test_subnets_are_labelled_by_their_keys_principals_with_der_keys_and_ranges(tree):
    for subnet in (ROOT, APP):
        label = principal_of(subnet).raw
        assert bls.public_key_from_der(at(tree, "subnet", label, "public_key")) == KEYS[subnet].public_key
    app = principal_of(APP).raw
    expected = tuple((canister_principal(lo), canister_principal(hi)) for lo, hi in APP_RANGES)
    assert decode_canister_ranges(at(tree, "subnet", app, "canister_ranges")) == expected
    assert decode_canister_ranges(at(tree, "subnet", principal_of(ROOT).raw, "canister_ranges")) == (
        (canister_principal(0), canister_principal(99)),)


def test_the_sharded_canister_ranges_hold_five_ranges_a_leaf(tree):
    app = principal_of(APP).raw
    shards = {label: at(tree, "canister_ranges", app, label) for label in (
        canister_principal(100).raw, canister_principal(150).raw)}
    assert [len(decode_canister_ranges(v)) for v in shards.values()] == [5, 2]
    ranges = revealed_ranges(tree, app)
    assert ranges == tuple((canister_principal(lo), canister_principal(hi)) for lo, hi in APP_RANGES) * 2


def test_our_own_leaves_keep_msgpack_and_stream_labels_keep_subnet_names(tree):
    assert decode(at(tree, "metadata", "height")) == (1, 9)
    assert at(tree, "streams", ROOT, "header")


def test_a_subnet_without_a_key_has_no_subtree():
    table = RoutingTable(((CanisterIdRange(0, 99), ROOT), (CanisterIdRange(100, 199), APP)))
    s = ReplicatedState(APP, NetworkTopology(1, table, subnet_public_keys=((ROOT, KEYS[ROOT].public_key),)))
    certified = build_state_trees(s).certified
    assert [label for label, _ in certified.get_subtree(b"subnet").items()] == [principal_of(ROOT).raw]
    assert [label for label, _ in certified.get_subtree(b"canister_ranges").items()] == [principal_of(ROOT).raw]


def test_the_subnet_principal_of_the_ic_root_key():
    """The NNS subnet's id is the self-authenticating id of the IC's root key (public vector)."""
    raw = bls.public_key_from_der(IC_ROOT_KEY)
    assert ic_encoding.subnet_principal_bytes(raw) == principal_from_text(
        "tdb26-jop6k-aogll-7ltgs-eruif-6kk7m-qpktf-gdiqx-mxtrf-vb5e6-eqe")


def threshold_certify(hash_tree, keys) -> bytes:
    message = state_root_message(reconstruct(hash_tree))
    return bls.combine_shares({i: bls.sign_share(keys.secret_shares[i - 1], message) for i in (1, 3, 4)}, keys.t)


@pytest.mark.parametrize("layout", ["flat", "sharded"])
def test_a_certificate_of_our_tree_verifies_as_an_ic_agent_verifies_it(layout):
    """The root subnet delegates to the app subnet with a witness of its own certified tree; the
    app subnet's certificate is a witness of its tree; replica.ic's verifier accepts it for a
    canister in the app subnet's ranges, refuses it for one outside them, and the request
    statuses read through replica.ic's lookup."""
    app = principal_of(APP)
    ranges_path = [b"subnet", app.raw, b"canister_ranges"] if layout == "flat" else [b"canister_ranges", app.raw]
    root_trie = build_state_trees(root_state()).certified
    delegation_tree = witness_tree(root_trie, plan_paths([[b"subnet", app.raw, b"public_key"], ranges_path, [b"time"]]))
    delegation = make_delegation(app, Certificate(delegation_tree, threshold_certify(delegation_tree, KEYS[ROOT])))

    app_trie = StateTreeBuilder().update(app_state()).certified
    answer = witness_tree(app_trie, plan_paths([[b"request_status", REPLIED], [b"request_status", REJECTED], [b"time"]]))
    certificate = Certificate(answer, threshold_certify(answer, KEYS[APP]), delegation)
    verified = verify_certificate(certificate, root_key=KEYS[ROOT].public_key, canister_id=canister_principal(150),
                                  subnet_id=app.raw)
    assert verified.time_ns == TIME and verified.subnet_id == app.raw
    assert reconstruct(verified.tree) == app_trie.digest()
    assert at(verified.tree, "request_status", REPLIED, "reply") == b"DIDL\x00\x00"
    assert decode_uleb128(at(verified.tree, "request_status", REJECTED, "reject_code")) == RejectCode.CANISTER_REJECT
    assert not isinstance(lookup_path(verified.tree, [b"request_status", PROCESSING, b"status"]), Found)
    with pytest.raises(CanisterOutsideRanges):
        verify_certificate(certificate, root_key=KEYS[ROOT].public_key, canister_id=canister_principal(99))


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=(1 << 80)))
def test_leb128_round_trips_and_only_the_shortest_form_decodes(n):
    data = ic_encoding.uleb128(n)
    assert decode_uleb128(data) == n
    with pytest.raises(UnhashableValue):
        decode_uleb128(data[:-1] + bytes([data[-1] | 0x80]) + b"\x00")


# -- node keys: what an agent checks a query answer's signature under ---------------------------

def _node_keys(subnet: str) -> tuple[bytes, ...]:
    from consensus_stub.node_signing_key import der_public_key, derive_signing_key
    return tuple(der_public_key(derive_signing_key(b"tree test", f"{subnet}-node-{i}")) for i in range(1, 5))


def test_each_nodes_signing_key_is_served_under_its_node_id():
    from dataclasses import replace

    from replica.ic.principal import node_principal
    keys = {APP: _node_keys(APP), ROOT: _node_keys(ROOT)}
    state = app_state()
    state.metadata.network_topology = replace(topology(), node_public_keys=tuple(keys.items()))
    tree = trie_hash_tree(build_state_trees(state).certified)
    for subnet in (APP, ROOT):
        for der in keys[subnet]:
            assert at(tree, "subnet", principal_of(subnet).raw, "node", node_principal(der).raw, "public_key") == der
        nodes = lookup_path(tree, [b"subnet", principal_of(subnet).raw, b"node"])
        assert isinstance(nodes, Found)
    stranger = node_principal(_node_keys("stranger")[0]).raw
    assert isinstance(lookup_path(tree, [b"subnet", principal_of(APP).raw, b"node", stranger]), Absent)


def test_a_topology_without_node_keys_serves_no_node_subtree(tree):
    assert isinstance(lookup_path(tree, [b"subnet", principal_of(APP).raw, b"node"]), Absent)


def test_node_keys_survive_the_state_codec_and_their_absence_keeps_the_old_bytes():
    from dataclasses import replace

    from state_manager.codec import CodecError
    from state_manager.encoding import encode
    from state_manager.state_codec import topology_from_value, topology_to_value
    plain = topology()
    with_nodes = replace(plain, node_public_keys=((APP, _node_keys(APP)),))
    assert topology_from_value(decode(encode(topology_to_value(with_nodes)))) == with_nodes
    assert len(topology_to_value(plain)) == 4 and topology_from_value(topology_to_value(plain)) == plain
    with pytest.raises(CodecError, match="absence"):
        topology_from_value(topology_to_value(plain) + ((),))
    with pytest.raises(CodecError, match="4 or 5"):
        topology_from_value(topology_to_value(with_nodes) + ((),))
