"""One root for the state manager's exceptions: every class defined in ``state_manager``
derives from ``StateManagerError``, keeps the built-in base its callers catch, and is an
ordinary class (raised, caught and pickled like any exception) even where mypyc compiles
its module."""

from __future__ import annotations

import importlib
import pickle
import pkgutil

import pytest

import state_manager
from state_manager.errors import StateManagerError


def _exception_classes():
    for info in pkgutil.walk_packages(state_manager.__path__, "state_manager."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == info.name:
                yield value


CLASSES = sorted(set(_exception_classes()), key=lambda cls: (cls.__module__, cls.__name__))


def test_there_are_many_exception_classes():
    assert len(CLASSES) > 100
    assert {cls.__module__ for cls in CLASSES} >= {
        "state_manager.codec", "state_manager.encoding", "state_manager.labeled_trie", "state_manager.queues",
        "state_manager.certified_slice.errors", "state_manager.tree_encoding", "state_manager.store",
    }


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_every_exception_derives_from_the_root_and_pickles(cls):
    assert issubclass(cls, StateManagerError)
    try:
        error = cls("message")
    except TypeError:  # an exception class with other constructor arguments
        return
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and str(copy) == str(error)


def test_built_in_bases_callers_catch_are_kept():
    from state_manager import certified_slice as cs
    from state_manager.codec import CodecError
    from state_manager.labeled_trie import LabelNotFoundError
    from state_manager.queues import QueueFullError
    from state_manager.stable_map import StableValueError

    assert issubclass(CodecError, ValueError) and issubclass(cs.SliceDecodeError, ValueError)
    assert issubclass(LabelNotFoundError, KeyError) and issubclass(StableValueError, TypeError)
    assert not issubclass(QueueFullError, ValueError)
