"""The Candid project's own test suite run against ``replica.ic.candid`` (``candid_suite``
reads the files; ``tests/ic/data/candid/README.md`` names their source).

Not run, each for a reason named here:

* tests whose types declare ``func`` or ``service`` references (most of ``subtypes`` and
  the reference part of ``reference``): reference types are not supported;
* tests whose inputs are all textual: the text format is not implemented.
"""

from __future__ import annotations

import pytest

from replica.ic import candid
from replica.ic.errors import CandidError, CandidUnsupported

from .candid_suite import load, same, text_value

FILES = ("prim.test.did", "construct.test.did", "overshoot.test.did", "spacebomb.test.did", "reference.test.did",
         "subtypes.test.did")
CASES = [case for name in FILES for case in load(name)]

UNSUPPORTED_REFERENCES = "func/service reference types are not supported"
TEXT_ONLY = "textual inputs only: the text format is not implemented"


def _decode(compiled: candid.Types, side) -> list:
    kind, value = side
    return compiled.decode(value) if kind == "blob" else text_value(value, compiled)


def exclusion(case) -> str | None:
    if case.left[0] == "text" and (case.right is None or case.right[0] == "text"):
        return TEXT_ONLY
    try:
        candid.types(case.types, candid.parse_definitions(case.definitions))
    except CandidUnsupported:
        return UNSUPPORTED_REFERENCES
    return None


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_suite_case(case):
    reason = exclusion(case)
    if reason is not None:
        pytest.skip(reason)
    compiled = candid.types(case.types, candid.parse_definitions(case.definitions))
    if case.relation == "!:":
        with pytest.raises(CandidError):
            _decode(compiled, case.left)
        return
    left = _decode(compiled, case.left)
    if case.relation == ":":
        return
    right = _decode(compiled, case.right)
    equal = len(left) == len(right) and all(same(a, b) for a, b in zip(left, right))
    assert equal == (case.relation == "=="), (left, right)


def test_the_suite_is_read_whole_and_the_exclusions_are_only_the_named_ones():
    reasons = [exclusion(case) for case in CASES]
    run = reasons.count(None)
    assert len(CASES) == 467 and run == 369
    assert reasons.count(UNSUPPORTED_REFERENCES) == 91 and reasons.count(TEXT_ONLY) == 7
