"""One root of exceptions per package, and the replica's tree documented completely.

Every public exception class defined in a package derives from that package's root. For
``replica`` the tree drawn in ``replica/errors.py`` must be the real one: every public class
appears there exactly once, under its nearest ``replica`` base, and nothing else does. Only
the SDK's exceptions (``Trap``, ``CallError``: canister code raises them) stand apart.
"""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import re

import pytest

import replica
import replica.errors
from consensus_stub.errors import ConsensusError
from message_routing.errors import MessageRoutingError
from replica.errors import ReplicaError
from state_manager.errors import StateManagerError
from xnet.errors import XNetError

ROOTS = {"consensus_stub": ConsensusError, "xnet": XNetError, "message_routing": MessageRoutingError,
         "state_manager": StateManagerError, "replica": ReplicaError}
#: The SDK's exceptions: what canister code raises, not what the replica refuses.
#: And the sandbox's faults: they stop canister code at a limit (``BaseException``, uncatchable).
SDK_ROOTS = {"Trap", "CallError", "SandboxFault"}


def _public_exceptions(package: str) -> list[type]:
    found = set()
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, f"{package}."):
        if info.name.endswith(".__main__"):   # runs the command line
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == info.name
                    and not name.startswith("_")):
                found.add(value)
    return sorted(found, key=lambda cls: (cls.__module__, cls.__name__))


_ENTRY = re.compile(r"^(?:(?P<indent>(?:│   |    )*)(?:├── |└── ))?(?P<name>[A-Z]\w*)")


def documented_tree(doc: str) -> dict[str, str | None]:
    """``{class name: parent name (None for a root)}`` from the tree drawings in ``doc``: its
    lines indented by four spaces; an entry is a name at the start or after ``├──``/``└──``."""
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in doc.splitlines():
        if not line.startswith("    "):
            continue
        match = _ENTRY.match(line[4:])
        if match is None:
            continue   # a description continued on the next line
        name = match["name"]
        depth = 0 if match.group(0) == name else len(match["indent"]) // 4 + 1
        if name in parents:
            raise AssertionError(f"{name} is drawn twice")
        del stack[depth:]
        parents[name] = stack[-1] if stack else None
        stack.append(name)
    return parents


def _replica_parent(cls: type) -> str | None:
    """The nearest base defined in ``replica`` (None for a root)."""
    for base in cls.__mro__[1:]:
        if base.__module__.split(".")[0] == "replica":
            return base.__name__
    return None


REPLICA = _public_exceptions("replica")
TREE = documented_tree(replica.errors.__doc__)


def test_the_tree_reader_reads_a_tree():
    doc = "x::\n\n    A\n    ├── B   text\n    │   └── C\n    │       more text\n    └── D\n    E\n"
    assert documented_tree(doc) == {"A": None, "B": "A", "C": "B", "D": "A", "E": None}


def test_class_names_are_unique_in_replica():
    names = [cls.__name__ for cls in REPLICA]
    assert len(names) > 90 and len(set(names)) == len(names)


def test_the_documented_tree_is_the_real_one():
    real = {cls.__name__: _replica_parent(cls) for cls in REPLICA}
    missing = sorted(set(real) - set(TREE))
    stale = sorted(set(TREE) - set(real))
    misplaced = sorted(f"{name}: drawn under {TREE[name]}, derives from {real[name]}"
                       for name in set(real) & set(TREE) if TREE[name] != real[name])
    assert not missing and not stale and not misplaced, (
        f"replica/errors.py: missing {missing}, not exception classes {stale}, misplaced {misplaced}")


def test_the_replica_has_one_root_besides_the_sdks():
    roots = {cls.__name__ for cls in REPLICA if _replica_parent(cls) is None}
    assert roots == {"ReplicaError"} | SDK_ROOTS


@pytest.mark.parametrize("package", sorted(ROOTS))
def test_every_public_exception_derives_from_its_packages_root(package):
    strays = [f"{cls.__module__}.{cls.__name__}" for cls in _public_exceptions(package)
              if not issubclass(cls, ROOTS[package])
              and not (package == "replica" and any(base.__name__ in SDK_ROOTS for base in cls.__mro__))]
    assert not strays


@pytest.mark.parametrize("cls", [c for c in REPLICA if issubclass(c, ReplicaError)], ids=lambda c: c.__name__)
def test_replica_errors_pickle(cls):
    """They cross process boundaries (Spark executors, replay subprocesses)."""
    try:
        error = cls("message")
    except TypeError:   # a class with other constructor arguments
        return
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and str(copy) == str(error)
