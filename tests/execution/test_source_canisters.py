"""The management canister: create_canister, install_code from source, upgrades, bad modules."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replica.ic.textual_ids import canister_text
from replica.execution import MANAGEMENT_CANISTER_ID, ExecutionEnvironment, SourceModules, source_module_hash
from replica.execution.errors import ModuleLoadError
from replica.sdk import encode_value
from state_manager.ingress_history import IngressState
from state_manager.messages import Ingress, RejectCode
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_tree import StateTreeBuilder, build_state_trees, canister_label, index_label
from tests.builders import topology

from .harness import USER, SingleSubnet, message_id, new_state, reply_value, run, status, submit

ROOT = Path(__file__).resolve().parents[2]
MGMT = MANAGEMENT_CANISTER_ID
OTHER_USER = b"\x09" * 29 + b"\x02"

GREETER = textwrap.dedent('''
    from replica.sdk import Canister, update, query, callback

    class Greeter(Canister):
        VERSION = 1

        def init(self, arg):
            self.stable["greeting"] = arg or "hello"

        @update
        def greet(self, name):
            self.stable["greeted"] = self.stable.get("greeted", 0) + 1
            return f"{self.stable['greeting']}, {name}"

        @update
        def ask(self, other):
            self.call(other, "greet", "friend", on_reply=self.got, on_reject=self.failed)

        @callback
        def got(self, reply, context):
            self.reply(reply)

        @callback
        def failed(self, reject, context):
            code, message = reject
            self.reject(f"{code}: {message}")

        @query
        def greeted(self):
            return self.stable.get("greeted", 0)
''')

GREETER_V2 = GREETER.replace("VERSION = 1", "VERSION = 2") + textwrap.indent(textwrap.dedent('''
    def post_upgrade(self, arg):
        self.stable["upgraded"] = arg
        if arg == "trap":
            raise RuntimeError("refused")

    @update
    def upgraded(self):
        return (self.stable.get("upgraded"), self.stable.get("greeted", 0))
'''), "    ")
assert "def upgraded" in GREETER_V2 and GREETER_V2 != GREETER


class Node:
    """One subnet's state and environment, driven the way a replica drives them: ingress through
    the valid set rule, then a round of execution."""

    def __init__(self, env: ExecutionEnvironment | None = None) -> None:
        self.env = env or ExecutionEnvironment()
        self.state = new_state()
        self.n = 0

    def call(self, receiver: int, method: str, arg=None, *, source: bytes = USER):
        self.n += 1
        mid = submit(self.state, receiver, method, arg, n=self.n, source=source)
        run(self.env, self.state)
        return status(self.state, mid)

    def ok(self, receiver: int, method: str, arg=None, *, source: bytes = USER):
        answer = self.call(receiver, method, arg, source=source)
        if answer.state is not IngressState.REPLIED:
            raise AssertionError(f"{method}: {answer.reject_code!r} {answer.reject_message}")
        from state_manager.encoding import decode
        return decode(answer.reply)

    def create(self, *, source: bytes = USER) -> int:
        return self.ok(MGMT, "create_canister", source=source)["canister_id"]

    def install(self, canister_id: int, source: str = GREETER, class_name: str = "Greeter", arg=None,
                mode: str = "install", *, caller: bytes = USER):
        return self.call(MGMT, "install_code", {"canister_id": canister_id, "mode": mode, "source": source,
                                                "class_name": class_name, "arg": arg}, source=caller)


def installed_greeter(arg=None) -> tuple[Node, int]:
    node = Node()
    cid = node.create()
    answer = node.install(cid, arg=arg)
    assert answer.state is IngressState.REPLIED, answer.reject_message
    return node, cid


# -- create_canister --------------------------------------------------------------------------

def test_create_canister_allocates_the_smallest_free_id_of_the_subnet_and_the_caller_controls_it():
    node = Node()
    assert [node.create() for _ in range(3)] == [0, 1, 2]
    canister = node.state.canisters[1]
    assert canister.controller == USER and canister.module_hash == b"" and canister.module_source == ""
    # a gap left by a canister installed out of order is filled first; ids already taken are skipped
    from replica.execution import install_canister
    from .apps import Probe
    install_canister(node.state, 4, Probe)
    assert [node.create() for _ in range(2)] == [3, 5]
    # the empty canister has no module hash under /canister/<id>, only its certified data and controllers
    certified = build_state_trees(node.state).certified.get_subtree(b"canister").get_subtree(canister_label(1))
    assert certified.get_leaf(b"module_hash") is None and certified.get_leaf(b"certified_data") is not None


def test_create_canister_when_the_ranges_are_full_is_rejected():
    node = Node()
    node.state = new_state()
    node.state.metadata.network_topology = topology(ranges={"subnet-a": (0, 1), "subnet-b": (100, 199)})
    assert [node.create(), node.create()] == [0, 1]
    full = node.call(MGMT, "create_canister")
    assert (full.state, full.reject_code) == (IngressState.REJECTED, RejectCode.CANISTER_ERROR)
    assert "no free canister id" in full.reject_message


def test_the_reserved_id_is_never_allocated():
    node = Node()
    node.state.metadata.network_topology = topology(ranges={"subnet-a": (MGMT - 1, MGMT), "subnet-b": (100, 199)})
    assert node.create() == MGMT - 1
    assert node.call(MGMT, "create_canister").state is IngressState.REJECTED


def test_calls_to_an_empty_canister_are_rejected_as_destination_invalid():
    node = Node()
    cid = node.create()
    answer = node.call(cid, "greet", "x")
    assert (answer.reject_code, answer.reject_message) == (
        RejectCode.DESTINATION_INVALID, f"Canister {canister_text(cid)} is empty: no code is installed")
    assert node.env.run_query(node.state, cid, "greeted").code is RejectCode.DESTINATION_INVALID
    assert node.state.metadata.counters["critical_errors"] == 0


def test_unknown_management_methods_and_bad_arguments_are_rejected():
    node = Node()
    for method, arg, text in [
        ("delete_everything", None, "has no method 'delete_everything'"),
        ("create_canister", 5, "takes no argument"),
        ("install_code", {"canister_id": 0}, "install_code takes"),
        ("install_code", {"canister_id": -1, "mode": "install", "source": "", "class_name": "X", "arg": None},
         "canister_id is a u64"),
        ("install_code", {"canister_id": 0, "mode": 1, "source": "", "class_name": "X", "arg": None}, "mode is text"),
    ]:
        answer = node.call(MGMT, method, arg)
        assert (answer.state, answer.reject_code) == (IngressState.REJECTED, RejectCode.CANISTER_ERROR), method
        assert text in answer.reject_message
        assert answer.receiver == MGMT


# -- install_code -------------------------------------------------------------------------------

def test_install_from_source_runs_init_and_the_module_hash_is_the_sha256_of_the_source():
    node, cid = installed_greeter("howdy")
    canister = node.state.canisters[cid]
    digest = hashlib.sha256(GREETER.encode("utf-8")).digest()
    assert canister.module_hash == digest == source_module_hash(GREETER)
    assert (canister.module_name, canister.module_source) == ("Greeter", GREETER)
    assert node.ok(cid, "greet", "you") == "howdy, you"
    assert node.env.run_query(node.state, cid, "greeted").data == encode_value(1)
    trees = build_state_trees(node.state)
    certified = trees.certified.get_subtree(b"canister").get_subtree(canister_label(cid))
    from state_manager.encoding import decode
    assert certified.get_leaf(b"module_hash") == digest   # the IC's leaf: the 32 bytes themselves
    full = trees.full.get_subtree(b"canister_state").get_subtree(index_label(cid))
    assert decode(full.get_subtree(b"module").get_leaf(b"source")) == (1, GREETER)


def test_install_code_answers_with_the_canister_and_module_hash():
    node = Node()
    cid = node.create()
    answer = node.install(cid)
    from state_manager.encoding import decode
    assert decode(answer.reply) == {"canister_id": cid, "module_hash": source_module_hash(GREETER)}


def test_canisters_installed_from_source_call_each_other_through_the_state_machine():
    subnet = SingleSubnet([])
    mids = [subnet.submit(MGMT, "create_canister"), subnet.submit(MGMT, "create_canister")]
    subnet.round()
    first, second = (reply_value(subnet.state, mid)["canister_id"] for mid in mids)
    for cid, greeting in ((first, None), (second, "hi")):
        subnet.submit(MGMT, "install_code", {"canister_id": cid, "mode": "install", "source": GREETER,
                                             "class_name": "Greeter", "arg": greeting})
    subnet.round()
    asked = subnet.submit(first, "ask", second)
    subnet.run_until_quiet()
    assert reply_value(subnet.state, asked) == "hi, friend"
    assert subnet.query(second, "greeted") == 1


@pytest.mark.parametrize("source, class_name, reason", [
    ("def broken(:\n", "Greeter", "the module does not compile: SyntaxError"),
    ("x = 1\0\n", "Greeter", "the module does not compile"),
    ("raise ValueError('no config')\n", "Greeter", "the module raised at import: ValueError: no config"),
    ("import sys\nsys.exit(3)\n", "Greeter", "line 1: import of 'sys' is not allowed (allowed modules: "),
    ("raise StopIteration(3)\n", "Greeter", "the module raised at import: StopIteration: 3"),
    ("import no_such_module_anywhere\n", "Greeter", "line 1: import of 'no_such_module_anywhere' is not allowed"),
    (GREETER, "Greeter2", "the module defines no class 'Greeter2'"),
    (GREETER, "greet", "the module defines no class 'greet'"),
    (GREETER, "Canister", "'Canister' is not a Canister subclass"),
    ("class Greeter:\n    pass\n", "Greeter", "'Greeter' is not a Canister subclass"),
    ("Greeter = 5\n", "Greeter", "'Greeter' is not a Canister subclass"),
    (GREETER, "not a name", "a class name is a (dotted) Python identifier"),
    ("from replica.sdk import Canister, update\nclass Greeter(Canister):\n    @update\n    def id(self):\n        pass\n",
     "Greeter", "CanisterDefinitionError"),
    (GREETER.replace('self.stable["greeting"] = arg or "hello"', 'raise RuntimeError("init says no")'), "Greeter",
     "init says no"),
])
def test_a_module_that_fails_to_load_is_a_clean_reject_and_the_canister_stays_empty(source, class_name, reason):
    node = Node()
    cid = node.create()
    answer = node.install(cid, source, class_name)
    assert (answer.state, answer.reject_code) == (IngressState.REJECTED, RejectCode.CANISTER_ERROR)
    assert reason in answer.reject_message
    canister = node.state.canisters[cid]
    assert (canister.module_hash, canister.module_source, len(canister.stable)) == (b"", "", 0)
    # the round went on: the same round's and later messages still run
    assert node.install(cid).state is IngressState.REPLIED
    assert node.ok(cid, "greet", "again") == "hello, again"
    assert node.state.metadata.counters["critical_errors"] == 0


def test_load_errors_are_the_same_text_on_every_load():
    texts = set()
    for _ in range(2):
        with pytest.raises(ModuleLoadError) as refused:
            SourceModules().load("x = (\n", "X")
        texts.add(str(refused.value))
    assert len(texts) == 1 and "line 1" in texts.pop()


def test_only_the_controller_installs_and_modes_must_fit_the_canister():
    node = Node()
    cid = node.create()
    answer = node.install(cid, caller=OTHER_USER)
    assert answer.reject_code is RejectCode.CANISTER_ERROR and "only the controller" in answer.reject_message
    for mode in ("reinstall", "upgrade"):
        assert "has no code: use mode install" in node.install(cid, mode=mode).reject_message
    assert "mode is one of" in node.install(cid, mode="replace").reject_message
    assert node.install(cid).state is IngressState.REPLIED
    assert "has code already" in node.install(cid).reject_message
    missing = node.install(77)
    assert (missing.reject_code, f"canister {canister_text(77)} not found" in missing.reject_message) == (RejectCode.DESTINATION_INVALID, True)
    # a builtin canister installed at genesis has no controller: nobody installs code on it
    from replica.execution import install_canister
    from .apps import Probe
    install_canister(node.state, 50, Probe)
    assert "only the controller" in node.install(50, mode="upgrade").reject_message


def test_upgrade_keeps_stable_state_and_runs_post_upgrade():
    node, cid = installed_greeter()
    node.ok(cid, "greet", "a")
    node.ok(cid, "greet", "b")
    node.state.canisters[cid].certified_data = b"kept"
    assert node.install(cid, GREETER_V2, mode="upgrade", arg="v2").state is IngressState.REPLIED
    canister = node.state.canisters[cid]
    assert canister.module_hash == source_module_hash(GREETER_V2) and canister.certified_data == b"kept"
    assert node.ok(cid, "upgraded") == ("v2", 2)
    assert node.ok(cid, "greet", "c") == "hello, c"   # init did not run again: the greeting is kept


def test_an_upgrade_whose_post_upgrade_traps_leaves_the_old_code_and_state():
    node, cid = installed_greeter()
    node.ok(cid, "greet", "a")
    answer = node.install(cid, GREETER_V2, mode="upgrade", arg="trap")
    assert answer.reject_code is RejectCode.CANISTER_ERROR and "refused" in answer.reject_message
    canister = node.state.canisters[cid]
    assert canister.module_source == GREETER and "upgraded" not in canister.stable
    assert canister.stable["greeted"] == 1


def test_reinstall_wipes_stable_state_and_runs_init_again():
    node, cid = installed_greeter()
    node.ok(cid, "greet", "a")
    node.state.canisters[cid].certified_data = b"old"
    assert node.install(cid, mode="reinstall", arg="yo").state is IngressState.REPLIED
    canister = node.state.canisters[cid]
    assert dict(canister.stable.items()) == {"greeting": "yo"} and canister.certified_data == b""
    assert node.ok(cid, "greet", "b") == "yo, b"


def test_a_reinstall_whose_init_traps_restores_the_stable_state():
    node, cid = installed_greeter()
    node.ok(cid, "greet", "a")
    trapping = GREETER.replace('self.stable["greeting"] = arg or "hello"',
                               'self.stable["greeting"] = "x"\n        raise RuntimeError("no")')
    assert node.install(cid, trapping, mode="reinstall").state is IngressState.REJECTED
    canister = node.state.canisters[cid]
    assert dict(canister.stable.items()) == {"greeting": "hello", "greeted": 1}
    assert canister.module_source == GREETER


def test_incremental_and_scratch_trees_agree_through_installs_and_upgrades():
    node = Node()
    builder = StateTreeBuilder()

    def check():
        assert builder.update(node.state).full_hash == build_state_trees(node.state).full_hash

    check()
    cid = node.create()
    check()
    node.install(cid)
    check()
    node.ok(cid, "greet", "a")
    check()
    node.install(cid, GREETER_V2, mode="upgrade")
    check()
    node.install(cid, GREETER, mode="reinstall")
    check()
    # a management call still queued is part of the full state
    node.n += 1
    submit(node.state, MGMT, "create_canister", n=node.n)
    with_queue = build_state_trees(node.state).full
    assert with_queue.get_subtree(b"management_queue") is not None
    assert builder.update(node.state).full_hash == with_queue.digest()


# -- the state holds the source: replay without the file ------------------------------------------

def test_state_encoding_round_trip_keeps_source_canisters_and_a_fresh_environment_runs_them():
    node, cid = installed_greeter("hey")
    node.ok(cid, "greet", "a")
    node.n += 1
    submit(node.state, MGMT, "create_canister", n=node.n)   # queued, not executed yet
    data = encode_state(node.state)
    decoded = decode_state(data)
    assert decoded == node.state
    assert decoded.management_queue.elements[0].receiver == MGMT
    assert build_state_trees(decoded).full_hash == build_state_trees(node.state).full_hash
    assert encode_state(decoded) == data
    fresh = Node(ExecutionEnvironment())   # no classes registered: the class comes from the state
    fresh.state = decoded
    fresh.n = node.n
    assert fresh.ok(cid, "greet", "b") == "hey, b"
    assert fresh.state.canisters[cid + 1].controller == USER   # the queued create_canister ran


def test_decoding_refuses_a_source_that_does_not_match_the_module_hash():
    node, cid = installed_greeter()
    node.state.canisters[cid].module_source = GREETER + "# changed\n"
    from state_manager.codec import CodecError
    with pytest.raises(CodecError, match="SHA-256 of its source"):
        decode_state(encode_state(node.state))


def test_the_loaded_class_is_cached_per_module_hash():
    modules = SourceModules()
    first = modules.load(GREETER, "Greeter")
    assert modules.load(GREETER, "Greeter") is first
    assert modules.load(GREETER_V2, "Greeter") is not first
    assert len(modules) == 2
    assert first.__module__ == "canister_" + source_module_hash(GREETER).hex()[:16]


SCRIPT = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from tests.execution import test_source_canisters as t
    from state_manager.state_tree import build_state_trees
    node, cid = t.installed_greeter("seeded")
    for name in ["b", "a", "c"]:
        node.ok(cid, "greet", name)
    second = node.create()
    node.install(second, t.GREETER_V2, "Greeter")
    node.install(second, "def x(:", "Greeter")
    node.install(second, t.GREETER_V2, "Greeter", mode="upgrade", arg={"b": 1, "a": (2, 3)})
    trees = build_state_trees(node.state)
    print(json.dumps([trees.full_hash.hex(), trees.certified_root.hex()]))
''')


def test_installs_are_deterministic_across_hash_seeds():
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout.strip())
    assert len(outputs) == 1, outputs
    assert len(json.loads(outputs.pop())) == 2


def test_management_ingress_is_inducted_only_while_its_queue_has_room():
    from message_routing.limits import MINIMAL
    from message_routing.valid_set_rule import IngressInductionFailure, induct_ingress
    state = new_state()
    failures = [induct_ingress(state, Ingress(USER, MGMT, "create_canister", b"", message_id(n), 50 * 10**9), MINIMAL)
                for n in range(MINIMAL.queue_capacity + 1)]
    assert failures[:-1] == [None] * MINIMAL.queue_capacity
    assert failures[-1] is IngressInductionFailure.QUEUE_FULL
    assert len(state.management_queue) == MINIMAL.queue_capacity
