"""The management canister's side of a migration: stop, status, export, import, start, delete —
and the snapshot format they move a canister in.

Two subnets' states (A hosts 0-99, B 100-199, ``tests.builders``) driven the way a replica
drives them: ingress through the valid set rule, then a round of execution."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.execution import MANAGEMENT_CANISTER_ID, ExecutionEnvironment
from state_manager.canister_snapshot import (
    CorruptSnapshot, decode_canister_snapshot, encode_canister_snapshot, snapshot_hash,
)
from state_manager.canister_state import CanisterStatus
from state_manager.encoding import decode
from state_manager.ingress_history import IngressState
from state_manager.messages import RejectCode, Reply
from state_manager.routing_table import CanisterIdRange
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_tree import StateTreeBuilder, build_state_trees
from tests.builders import A, B, topology

from .harness import USER, new_state
from .test_source_canisters import GREETER, Node

MGMT = MANAGEMENT_CANISTER_ID
STRANGER = b"\x09" * 29 + b"\x02"


class Subnet(Node):
    """One subnet's state (``Node``: ingress through the valid set rule, then a round)."""

    def __init__(self, subnet: str) -> None:
        super().__init__()
        self.state = new_state(subnet)

    def query(self, canister_id: int, method: str, arg=None):
        answer = self.env.run_query(self.state, canister_id, method, arg)
        assert isinstance(answer, Reply), answer
        return decode(answer.data)

    def rejected(self, receiver: int, method: str, arg=None, *, source: bytes = USER) -> tuple[int, str]:
        answer = self.call(receiver, method, arg, source=source)
        assert answer.state is IngressState.REJECTED, (method, answer.reply)
        return answer.reject_code, answer.reject_message

    def route(self, canister_id: int, subnet: str, trace: tuple[str, ...] = ()) -> None:
        """Switch this state's topology as a new registry version would."""
        old = self.state.metadata.network_topology
        moved = CanisterIdRange(canister_id, canister_id)
        migrations = old.canister_migrations.with_trace(moved, trace) if trace else old.canister_migrations
        self.state.metadata.network_topology = type(old)(
            old.registry_version + 1, old.routing_table.with_assignment(moved, subnet), migrations)


def greeter_on(source: Subnet) -> int:
    cid = source.ok(MGMT, "create_canister")["canister_id"]
    source.ok(MGMT, "install_code", {"canister_id": cid, "mode": "install", "source": GREETER,
                                      "class_name": "Greeter", "arg": None})
    source.ok(cid, "greet", "moving")
    return cid


def test_a_canister_moves_with_its_id_module_and_stable_state():
    a, b = Subnet(A), Subnet(B)
    cid = greeter_on(a)
    greeted = a.query(cid, "greeted")
    assert a.ok(MGMT, "stop_canister", {"canister_id": cid})["status"] == "stopped"
    exported = a.ok(MGMT, "export_canister", {"canister_id": cid})
    assert exported["snapshot_hash"] == snapshot_hash(exported["snapshot"])
    a.route(cid, B, (A, B))
    b.route(cid, B, (A, B))
    assert b.ok(MGMT, "import_canister", exported) == {"canister_id": cid}
    assert b.ok(MGMT, "canister_status", {"canister_id": cid})["status"] == "stopped"
    assert b.ok(MGMT, "start_canister", {"canister_id": cid})["status"] == "running"
    assert b.query(cid, "greeted") == greeted            # the same stable state answers on B
    assert b.ok(cid, "greet", "again") == "hello, again"
    moved = b.state.canisters[cid]
    assert moved.module_hash == a.state.canisters[cid].module_hash and moved.controller == USER
    assert a.ok(MGMT, "delete_canister", {"canister_id": cid}) == {"canister_id": cid}
    assert cid not in a.state.canisters
    # the incremental state trees of both subnets equal trees built from scratch
    for subnet in (a, b):
        fresh = decode_state(encode_state(subnet.state))
        assert build_state_trees(fresh).full_hash == build_state_trees(subnet.state).full_hash


def test_incremental_hashing_sees_an_imported_canister_like_a_fresh_build():
    a, b = Subnet(A), Subnet(B)
    builder = StateTreeBuilder()
    builder.update(b.state)
    cid = greeter_on(a)
    a.ok(MGMT, "stop_canister", {"canister_id": cid})
    exported = a.ok(MGMT, "export_canister", {"canister_id": cid})
    b.route(cid, B, (A, B))
    b.ok(MGMT, "import_canister", exported)
    assert builder.update(b.state).full_hash == build_state_trees(decode_state(encode_state(b.state))).full_hash


def test_every_step_refuses_what_would_lose_or_duplicate_a_canister():
    a, b = Subnet(A), Subnet(B)
    cid = greeter_on(a)
    code, message = a.rejected(MGMT, "export_canister", {"canister_id": cid})
    assert code == RejectCode.SYS_TRANSIENT and "stop it first" in message
    code, _ = a.rejected(MGMT, "stop_canister", {"canister_id": cid}, source=STRANGER)
    assert code == RejectCode.CANISTER_ERROR
    code, _ = a.rejected(MGMT, "delete_canister", {"canister_id": cid})
    assert code == RejectCode.CANISTER_ERROR                    # not stopped
    a.ok(MGMT, "stop_canister", {"canister_id": cid})
    exported = a.ok(MGMT, "export_canister", {"canister_id": cid})
    # B refuses the import until its routing table maps the canister to B
    code, message = b.rejected(MGMT, "import_canister", exported)
    assert code == RejectCode.DESTINATION_INVALID and "routing table" in message
    b.route(cid, B, (A, B))
    code, message = b.rejected(MGMT, "import_canister", {**exported, "snapshot_hash": bytes(32)})
    assert code == RejectCode.CANISTER_ERROR and "does not hash" in message
    code, message = b.rejected(MGMT, "import_canister", exported, source=STRANGER)
    assert code == RejectCode.CANISTER_ERROR and "controller" in message
    b.ok(MGMT, "import_canister", exported)
    code, message = b.rejected(MGMT, "import_canister", exported)
    assert code == RejectCode.CANISTER_ERROR and "already exists" in message
    for bad in (None, {}, {"canister_id": -1}, {"canister_id": cid, "extra": 1}, {"canister_id": "x"}):
        assert b.rejected(MGMT, "canister_status", bad)[0] == RejectCode.CANISTER_ERROR
    assert b.rejected(MGMT, "canister_status", {"canister_id": 5})[0] == RejectCode.DESTINATION_INVALID


def test_an_id_on_a_migration_trace_is_never_handed_out():
    b = Subnet(B)
    b.route(100, B, (A, B))          # canister 100 is on its way to B
    assert b.ok(MGMT, "create_canister")["canister_id"] == 101


def test_snapshots_round_trip_and_refuse_garbage():
    a = Subnet(A)
    cid = greeter_on(a)
    canister = a.state.canisters[cid]
    snapshot = encode_canister_snapshot(canister)
    back = decode_canister_snapshot(snapshot)
    assert encode_canister_snapshot(back) == snapshot and dict(back.stable.items()) == dict(canister.stable.items())
    for bad in (b"", b"\x90", snapshot[:-1], snapshot + b"\x00", b"\x93\x02\x02\x90", "text"):
        with pytest.raises(CorruptSnapshot):
            decode_canister_snapshot(bad)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_decoding_any_bytes_gives_a_canister_or_corrupt_snapshot(data):
    try:
        decode_canister_snapshot(data)
    except CorruptSnapshot:
        pass


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=20), st.integers(min_value=0, max_value=20))
def test_corrupting_one_byte_never_decodes_to_the_same_canister_unnoticed(position, flip):
    a = Subnet(A)
    cid = greeter_on(a)
    snapshot = bytearray(encode_canister_snapshot(a.state.canisters[cid]))
    index = position * len(snapshot) // 21
    snapshot[index] ^= (flip % 255) + 1
    try:
        back = decode_canister_snapshot(bytes(snapshot))
    except CorruptSnapshot:
        return
    assert encode_canister_snapshot(back) == bytes(snapshot)   # canonical: a change is a different canister


def test_the_routing_table_reassignment_is_exact():
    table = topology().routing_table
    moved = table.with_assignment(CanisterIdRange(50, 50), B)
    assert [moved.lookup(c) for c in (49, 50, 51, 150)] == [A, B, A, B]
    assert moved.with_assignment(CanisterIdRange(50, 50), A) == table     # back again: the original table
    assert CanisterStatus.STOPPED  # the status names used above exist
