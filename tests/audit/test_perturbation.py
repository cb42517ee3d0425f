"""Perturbation and fault specs: canonical text, parsing, validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replica.audit.errors import FaultError, PerturbationError
from replica.audit.perturbation import NONE, Fault, Perturbation, parse_fault, parse_perturbation


@st.composite
def perturbations(draw):
    start = draw(st.integers(0, 50))
    restart = draw(st.none() | st.integers(start + 1, start + 60))
    fault = draw(st.none() | st.builds(
        lambda kind, h, m, o: Fault(kind, h, m, (m + 1 + o) if kind == "swap" and o is not None else None),
        st.sampled_from(["flip", "drop", "swap"]), st.integers(start + 1, start + 60), st.integers(0, 40),
        st.none() | st.integers(0, 5)))
    return Perturbation(start, restart, draw(st.none() | st.integers(0, 2**32)), draw(st.none() | st.integers(0, 2**32 - 1)),
                        fault)


@given(perturbations())
def test_text_round_trip(p):
    assert parse_perturbation(p.text()) == p


def test_examples():
    p = parse_perturbation("checkpoint@30+restart@40+shuffle:7+hashseed:3")
    assert p == Perturbation(start=30, restart_at=40, shuffle_seed=7, hash_seed=3)
    assert p.kinds() == ("checkpoint", "restart", "shuffle", "hashseed")
    assert parse_perturbation("hashseed:3+checkpoint@30").text() == "checkpoint@30+hashseed:3"
    assert parse_perturbation("none") is NONE and NONE.kinds() == ("none",)
    assert parse_perturbation("fault:swap@12:3").fault == Fault("swap", 12, 3, 4) == Fault("swap", 12, 3)
    assert parse_perturbation("fault:swap@12:3").text() == "fault:swap@12:3:4"
    assert parse_fault("drop@5") == Fault("drop", 5, 0)


@pytest.mark.parametrize("text", [
    "bogus", "checkpoint@x", "shuffle:1+shuffle:2", "restart@3+checkpoint@5", "fault:flip@2:1:2", "fault:melt@2",
    "checkpoint@9+fault:drop@9", "hashseed:4294967296",
])
def test_bad_specs(text):
    with pytest.raises(PerturbationError):
        parse_perturbation(text)


def test_bad_faults():
    with pytest.raises(FaultError):
        Fault("swap", 3, 2, 2)
    with pytest.raises(FaultError):
        Fault("flip", 0)
    with pytest.raises(FaultError):
        Fault("drop", 1, -1)
