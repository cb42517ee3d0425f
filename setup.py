"""Build hook: compile the hottest pure-core modules with mypyc.

The compiled modules are the very same Python sources (mypyc turns the type-annotated code
into a C extension), so there is one implementation; the interpreter runs the sources
unchanged when they are not compiled. Set ``SUBNET_REPLICA_PURE_PYTHON=1`` to skip
compilation (no C compiler needed).

It also builds ``state_manager._sha256``, a small C helper over OpenSSL's SHA-256 for the
state tree's short hashes (see ``state_manager/sha256.py``). It is optional: where it cannot
be built, hashlib computes the same digests.
"""

import os

from setuptools import Extension, setup

#: Modules compiled when mypyc is available. They must type-check under mypy: mypyc
#: enforces annotations at run time.
COMPILED_MODULES = [
    "state_manager/labeled_trie.py",
    "state_manager/state_tree.py",
    "state_manager/codec.py",
    "state_manager/encoding.py",
    "state_manager/state_codec.py",
    "state_manager/stable_map.py",
    "state_manager/queues.py",
    "state_manager/ingress_history.py",
    "replica/execution/scheduler.py",
]


#: C sources of optional extensions (``Makefile`` rebuilds when they change).
C_SOURCES = {"state_manager._sha256": "state_manager/_sha256.c"}


def extensions() -> list:
    if os.environ.get("SUBNET_REPLICA_PURE_PYTHON") == "1":
        return []
    from mypyc.build import mypycify

    helpers = [Extension(name, [source], libraries=["crypto"], optional=True) for name, source in C_SOURCES.items()]
    return mypycify(COMPILED_MODULES, opt_level="3") + helpers


setup(ext_modules=extensions())
