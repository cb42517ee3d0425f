"""Canister logs (issue 24): ``self.log``, trap records, the bound, the lifecycle, reading them
through ``fetch_canister_logs``, and moving them with a migration."""

from __future__ import annotations

import textwrap

from message_routing.limits import DEFAULT
from replica.ic.textual_ids import canister_text
from replica.execution import MANAGEMENT_CANISTER_ID, ExecutionEnvironment, install_canister
from replica.sdk import Canister, Trap, query, update
from state_manager.canister_log import RECORD_OVERHEAD_BYTES
from state_manager.ingress_history import IngressState
from state_manager.messages import RejectCode
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_tree import StateTreeBuilder, build_state_trees
from tests.builders import A, B

from .harness import USER, new_state, run, status, submit
from .test_migration_management import STRANGER, Subnet
from .test_source_canisters import Node

MGMT = MANAGEMENT_CANISTER_ID

DIARY = textwrap.dedent('''
    from replica.sdk import Canister, Trap, update, query

    class Diary(Canister):
        VERSION = 1

        def init(self, arg):
            self.log(f"init {arg}")
            if arg == "trap":
                raise Trap("init refused")

        def post_upgrade(self, arg):
            self.log(f"upgraded {arg}")
            if arg == "trap":
                raise Trap("upgrade refused")

        @update
        def write(self, texts):
            for text in texts:
                self.log(text)
            return len(texts)

        @update
        def fail(self, text):
            self.log(text)
            self.stable["failed"] = True
            raise Trap(f"refused {text}")

        @update
        def spin(self):
            self.log("spinning")
            while True:
                pass

        @update
        def not_text(self):
            self.log(b"bytes")

        @query
        def peek(self, text):
            self.log(text)
            return text
''')


def _texts(node: Node, cid: int) -> list[str]:
    return [r.content for r in node.state.canisters[cid].log.records]


def _diary(node: Node | None = None, arg=None) -> tuple[Node, int]:
    node = node or Node()
    cid = node.create()
    answer = node.install(cid, DIARY, "Diary", arg)
    assert answer.state is IngressState.REPLIED, answer.reject_message
    return node, cid


def test_a_message_logs_with_the_batch_time_and_indices_count_up():
    node, cid = _diary(arg="a")
    node.state.metadata.batch_time = 7 * 10**9
    assert node.ok(cid, "write", ["one", "two \u2713"]) == 2
    records = node.state.canisters[cid].log.records
    assert [(r.index, r.content) for r in records] == [(0, "init a"), (1, "one"), (2, "two \u2713")]
    assert [r.timestamp_nanos for r in records] == [10**9, 7 * 10**9, 7 * 10**9]


def test_a_trap_rolls_its_records_back_and_the_system_logs_the_trap_with_its_instructions():
    node, cid = _diary()
    answer = node.call(cid, "fail", "boom")
    assert answer.state is IngressState.REJECTED and "refused boom" in answer.reject_message
    assert "failed" not in node.state.canisters[cid].stable            # its other effects are gone too
    *_, trap = node.state.canisters[cid].log.records
    assert _texts(node, cid) == ["init None", trap.content]              # "boom" itself was rolled back
    assert trap.content.startswith("trapped: Trap: refused boom (") and trap.content.endswith(" instructions)")
    used = int(trap.content.rsplit("(", 1)[1].split()[0])
    assert used > 0
    assert node.call(cid, "not_text").state is IngressState.REJECTED   # self.log takes text only
    assert _texts(node, cid)[-1].startswith("trapped: ApiUsageError: a log record is text")


def test_the_instruction_limit_is_logged_as_a_trap():
    node, cid = _diary()
    limits = DEFAULT.with_(max_instructions_per_message=50_000)
    node.n += 1
    mid = submit(node.state, cid, "spin", None, n=node.n)
    run(node.env, node.state, limits)
    assert status(node.state, mid).reject_message == \
        f"Canister {canister_text(cid)} exceeded the instruction limit for single message execution"
    assert _texts(node, cid)[-1] == \
        "trapped: exceeded the instruction limit for single message execution (50000 instructions)"


def test_the_log_keeps_the_newest_records_within_the_limit():
    node, cid = _diary()
    limits = DEFAULT.with_(max_canister_log_bytes=4 * (RECORD_OVERHEAD_BYTES + 10))
    for n in range(3):
        node.n += 1
        submit(node.state, cid, "write", [f"rec {n}-{k:04d}" for k in range(3)], n=node.n)   # 10 bytes each
        run(node.env, node.state, limits)
    log = node.state.canisters[cid].log
    assert [r.content for r in log.records] == ["rec 1-0002", "rec 2-0000", "rec 2-0001", "rec 2-0002"]
    assert [r.index for r in log.records] == [6, 7, 8, 9] and log.next_index == 10
    assert sum(len(r.content.encode()) for r in log.records) <= limits.max_canister_log_bytes


def test_queries_log_nothing():
    node, cid = _diary()
    assert node.env.run_query(node.state, cid, "peek", "seen?").data
    assert _texts(node, cid) == ["init None"]


def test_upgrades_keep_the_log_reinstalls_purge_it_and_failed_installs_leave_it_as_it_was():
    node, cid = _diary(arg="first")
    node.ok(cid, "write", ["kept"])
    assert node.install(cid, DIARY, "Diary", "v2", mode="upgrade").state is IngressState.REPLIED
    assert _texts(node, cid) == ["init first", "kept", "upgraded v2"]
    before = node.state.canisters[cid].log
    for mode in ("upgrade", "reinstall"):
        failed = node.install(cid, DIARY, "Diary", "trap", mode=mode)
        assert failed.state is IngressState.REJECTED and "refused" in failed.reject_message
        assert node.state.canisters[cid].log == before                   # no record, none lost
    assert node.install(cid, DIARY, "Diary", "again", mode="reinstall").state is IngressState.REPLIED
    log = node.state.canisters[cid].log
    assert [(r.index, r.content) for r in log.records] == [(3, "init again")]   # purged; indices go on


def test_builtin_canisters_log_too_and_their_traps_carry_no_instruction_count():
    class Noisy(Canister):
        def init(self, arg):
            self.log("born")

        @update
        def shout(self, text):
            self.log(text)
            if text == "trap":
                raise Trap("no")

        @query
        def nothing(self):
            return None

    s = new_state()
    env = ExecutionEnvironment([Noisy])
    install_canister(s, 3, Noisy, controller=USER)
    for n, text in enumerate(("hi", "trap")):
        submit(s, 3, "shout", text, n=n)
        run(env, s)
    assert [r.content for r in s.canisters[3].log.records] == ["born", "hi", "trapped: no"]


def test_fetch_canister_logs_answers_the_controller_only():
    node, cid = _diary()
    node.ok(cid, "write", ["hello"])
    node.call(cid, "fail", "x")
    answer = node.ok(MGMT, "fetch_canister_logs", {"canister_id": cid})
    records = answer["canister_log_records"]
    assert [r["idx"] for r in records] == [0, 1, 2]
    assert [r["content"] for r in records][:2] == ["init None", "hello"]
    assert all(r["timestamp_nanos"] == node.state.metadata.batch_time for r in records)
    stranger = node.call(MGMT, "fetch_canister_logs", {"canister_id": cid}, source=STRANGER)
    assert (stranger.state, stranger.reject_code) == (IngressState.REJECTED, RejectCode.CANISTER_ERROR)
    assert "only the controller" in stranger.reject_message
    missing = node.call(MGMT, "fetch_canister_logs", {"canister_id": 55})
    assert missing.reject_code == RejectCode.DESTINATION_INVALID
    assert node.call(MGMT, "fetch_canister_logs", {"canister": cid}).reject_code == RejectCode.CANISTER_ERROR


def test_a_migration_carries_the_log():
    a, b = Subnet(A), Subnet(B)
    _, cid = _diary(a, arg="on A")
    a.ok(cid, "write", ["before the move"])
    log = a.state.canisters[cid].log
    a.ok(MGMT, "stop_canister", {"canister_id": cid})
    exported = a.ok(MGMT, "export_canister", {"canister_id": cid})
    a.route(cid, B, (A, B))
    b.route(cid, B, (A, B))
    builder = StateTreeBuilder()
    builder.update(b.state)
    b.ok(MGMT, "import_canister", exported)
    assert b.state.canisters[cid].log == log
    b.ok(MGMT, "start_canister", {"canister_id": cid})
    b.ok(cid, "write", ["after the move"])
    assert [r.content for r in b.state.canisters[cid].log.records][-2:] == ["before the move", "after the move"]
    assert builder.update(b.state).full_hash == build_state_trees(decode_state(encode_state(b.state))).full_hash


PRINTER = textwrap.dedent('''
    from replica.sdk import Canister, Trap, update, query

    print("loading")                        # the module's body: outside any message, no record

    class Printer(Canister):
        def init(self, arg):
            print("init", arg)

        @update
        def show(self, values):
            print(*values)
            print("a", "b", sep="-", end="!\\n")
            print("no newline", end="")
            return len(values)

        @update
        def show_then_trap(self, text):
            print(text)
            raise Trap("after print")

        @update
        def to_file(self):
            print("x", file=1)

        @query
        def peek(self, text):
            print(text)
            return text
''')


def test_print_writes_records_of_the_canister_log_like_self_log():
    node = Node()
    cid = node.create()
    assert node.install(cid, PRINTER, "Printer", 7).state is IngressState.REPLIED
    assert node.ok(cid, "show", [1, "two", [3]]) == 3
    assert _texts(node, cid) == ["init 7", "1 two (3,)", "a-b!", "no newline"]   # lists arrive as tuples
    assert node.call(cid, "show_then_trap", "gone").state is IngressState.REJECTED
    assert _texts(node, cid)[-1].startswith("trapped: Trap: after print (")     # the print was rolled back
    assert "gone" not in _texts(node, cid)
    refused = node.call(cid, "to_file")
    assert refused.state is IngressState.REJECTED and "no file" in refused.reject_message
    count = len(node.state.canisters[cid].log.records)
    assert node.env.run_query(node.state, cid, "peek", "q").data                    # queries log nothing
    assert len(node.state.canisters[cid].log.records) == count
