"""Canister class rules, module names and hashes, the registry, per-message instances."""

from __future__ import annotations

import hashlib

import pytest

from examples.counter import Counter
from replica.execution import CanisterRegistry, ExecutionEnvironment, install_canister, module_hash, module_name_of
from replica.execution.errors import CanisterDefinitionError
from replica.sdk import Canister, callback, query, update
from state_manager.encoding import encode

from .harness import new_state, reply_value, run, submit


def test_module_name_and_hash_depend_only_on_name_and_version():
    assert module_name_of(Counter) == "examples.counter:Counter"
    expected = hashlib.sha256(encode(("replica-canister-module", "examples.counter:Counter", 1))).digest()
    assert module_hash(Counter) == expected

    class Bumped(Counter):
        VERSION = 2

    assert module_hash(Bumped) != module_hash(Counter)


@pytest.mark.parametrize("body", [
    "@callback\ndef cb(self, value): pass",
    "@update\ndef two(self, a, b): pass",
    "@update\ndef star(self, *args): pass",
    "@query\ndef kw(self, *, a): pass",
    "def reply(self, value): pass",
    "stable = 1",
    "VERSION = 1.5",
    "@update\ndef init(self, arg): pass",
    "@update\ndef original(self): pass\nalias = original",
    "init = 3",
])
def test_bad_canister_definitions_are_refused_when_the_class_is_made(body):
    source = "class Bad(Canister):\n" + "\n".join("    " + line for line in body.splitlines())
    with pytest.raises(CanisterDefinitionError):
        exec(source, {"Canister": Canister, "update": update, "query": query, "callback": callback})


def test_decorators_take_plain_functions_only():
    with pytest.raises(CanisterDefinitionError):
        update(staticmethod(lambda: None))


def _make_class():
    class Twin(Canister):
        pass
    return Twin


def test_registry_refuses_non_canisters_and_conflicting_names():
    first, second = _make_class(), _make_class()  # two classes, one module name
    with pytest.raises(CanisterDefinitionError):
        CanisterRegistry([int])
    with pytest.raises(CanisterDefinitionError):
        CanisterRegistry([first, second])
    assert CanisterRegistry([first, first]).names() == (module_name_of(first),)
    registry = CanisterRegistry({"name": first})
    assert registry.names() == ("name",) and registry.class_of("name") is first and "name" in registry


def test_methods_are_inherited():
    class Child(Counter):
        pass

    assert set(Child.__canister_methods__) == {"increment", "get"}


class Forgetful(Canister):
    @update
    def bump(self):
        self.seen = getattr(self, "seen", 0) + 1  # an instance attribute: gone after the message
        return self.seen


def test_instance_attributes_do_not_persist_between_messages():
    s = new_state()
    install_canister(s, 1, Forgetful)
    env = ExecutionEnvironment([Forgetful])
    first, second = submit(s, 1, "bump", n=1), submit(s, 1, "bump", n=2)
    run(env, s)
    assert reply_value(s, first) == reply_value(s, second) == 1
