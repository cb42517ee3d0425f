"""Build hook: compile the hottest pure-core modules with mypyc.

The compiled modules are the very same Python sources (mypyc turns the type-annotated code
into a C extension), so there is one implementation; the interpreter runs the sources
unchanged when they are not compiled. Set ``SUBNET_REPLICA_PURE_PYTHON=1`` to skip
compilation (no C compiler needed).
"""

import os

from setuptools import setup

#: Modules compiled when mypyc is available. They must type-check under mypy: mypyc
#: enforces annotations at run time.
COMPILED_MODULES = [
    "state_manager/labeled_trie.py",
]


def extensions() -> list:
    if os.environ.get("SUBNET_REPLICA_PURE_PYTHON") == "1":
        return []
    from mypyc.build import mypycify

    return mypycify(COMPILED_MODULES, opt_level="3")


setup(ext_modules=extensions())
