"""Instructions used per message, visible (issue 24): the replicated per-canister total that
``canister_status`` reports, and what an observer of the execution sees per message."""

from __future__ import annotations

from message_routing.limits import DEFAULT
from replica.execution import MANAGEMENT_CANISTER_ID, ExecutionEnvironment, install_canister
from replica.execution.message_execution import instructions_counter
from state_manager.ingress_history import IngressState

from .apps import Probe
from .harness import USER, SingleSubnet, new_state, reply_value, run, submit
from .test_canister_logs import DIARY
from .test_source_canisters import GREETER, Node, installed_greeter

MGMT = MANAGEMENT_CANISTER_ID


def _status(node: Node, cid: int) -> dict:
    return node.ok(MGMT, "canister_status", {"canister_id": cid})


def test_canister_status_reports_the_instructions_executed_by_installs_updates_and_callbacks():
    node, cid = installed_greeter()
    after_install = _status(node, cid)["instructions_executed"]
    assert after_install > 0                                   # the module body and init
    seen = []
    with node.env.observed_by(lambda canister, message, usage: seen.append((canister, usage.kind, usage.instructions))):
        node.ok(cid, "greet", "ada")
    assert [(c, kind) for c, kind, _ in seen] == [(cid, "update")]
    assert _status(node, cid)["instructions_executed"] == after_install + seen[0][2]
    # a query runs unreplicated: the observer sees it, the replicated total does not change
    total = _status(node, cid)["instructions_executed"]
    seen.clear()
    with node.env.observed_by(lambda canister, message, usage: seen.append((canister, usage.kind, usage.instructions))):
        assert node.env.run_query(node.state, cid, "greeted").data
    assert [(c, kind) for c, kind, _ in seen] == [(cid, "query")] and seen[0][2] > 0
    assert _status(node, cid)["instructions_executed"] == total


def test_a_call_between_canisters_shows_the_update_the_callee_and_the_callback():
    subnet = SingleSubnet([])
    mids = [subnet.submit(MGMT, "create_canister"), subnet.submit(MGMT, "create_canister")]
    subnet.round()
    first, second = (reply_value(subnet.state, mid)["canister_id"] for mid in mids)
    for cid, greeting in ((first, None), (second, "hi")):
        subnet.submit(MGMT, "install_code", {"canister_id": cid, "mode": "install", "source": GREETER,
                                             "class_name": "Greeter", "arg": greeting})
    subnet.round()
    seen = []
    subnet.submit(first, "ask", second)
    with subnet.env.observed_by(lambda canister, message, usage: seen.append((canister, usage.kind, usage.instructions))):
        subnet.run_until_quiet()
    assert [(c, kind) for c, kind, _ in seen] == [(first, "update"), (second, "update"), (first, "callback")]
    assert all(used > 0 for *_, used in seen)
    assert subnet.env.observer is None                          # only inside the block


def test_the_limit_trap_is_seen_and_counted_like_any_message():
    node = Node()
    cid = node.create()
    assert node.install(cid, DIARY, "Diary").state is IngressState.REPLIED
    before = _status(node, cid)["instructions_executed"]
    limits = DEFAULT.with_(max_instructions_per_message=50_000)
    seen = []
    node.n += 1
    submit(node.state, cid, "spin", None, n=node.n)
    with node.env.observed_by(lambda canister, message, usage: seen.append(usage)):
        run(node.env, node.state, limits)
    assert [(u.kind, u.instructions, u.limit_exceeded) for u in seen] == [("update", 50_000, True)]
    assert _status(node, cid)["instructions_executed"] == before + 50_000


def test_a_state_that_never_ran_metered_code_has_no_instruction_counter_and_deletion_drops_it():
    state = new_state()
    install_canister(state, 3, Probe, controller=USER)
    before = dict(state.metadata.counters)
    submit(state, 3, "echo", 1, n=1)
    run(ExecutionEnvironment([Probe]), state)
    assert not any(name.startswith("canister_instructions_executed") for name in state.metadata.counters)
    assert set(state.metadata.counters) == set(before)

    node, cid = installed_greeter()
    assert instructions_counter(cid) in node.state.metadata.counters
    node.ok(MGMT, "stop_canister", {"canister_id": cid})
    node.ok(MGMT, "delete_canister", {"canister_id": cid})
    assert instructions_counter(cid) not in node.state.metadata.counters


def test_installs_are_observed_with_their_instructions_and_limit_traps():
    node = Node()
    cid = node.create()
    seen = []
    with node.env.observed_by(lambda canister, message, usage: seen.append((canister, usage.kind, usage.instructions,
                                                                             usage.limit_exceeded))):
        assert node.install(cid, DIARY, "Diary").state is IngressState.REPLIED
        node.ok(MGMT, "canister_status", {"canister_id": cid})          # no instructions: not an install
    assert [(c, kind, exceeded) for c, kind, _, exceeded in seen] == [(cid, "install", False)]
    assert seen[0][2] == _status(node, cid)["instructions_executed"] > 0
    # an init that runs past the install limit: seen as a limit trap of kind "install"
    spinning_init = DIARY.replace('        if arg == "trap":', '        while arg == "spin":\n            pass\n        if arg == "trap":', 1)
    assert spinning_init != DIARY
    other = node.create()
    seen.clear()
    limits = DEFAULT.with_(max_instructions_per_install=200_000)
    node.n += 1
    submit(node.state, MGMT, "install_code", {"canister_id": other, "mode": "install", "source": spinning_init,
                                              "class_name": "Diary", "arg": "spin"}, n=node.n)
    with node.env.observed_by(lambda canister, message, usage: seen.append((canister, usage.kind, usage.limit_exceeded))):
        run(node.env, node.state, limits)
    assert seen == [(other, "install", True)]
