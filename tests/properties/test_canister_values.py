"""Whatever value a canister hands the system (return value, reply, stable state, call
argument or call context), the round goes on: the value is used if it has a canonical
encoding, and otherwise the message traps. Nothing it hands over may crash execution or
reach the state tree unencodable."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from replica.execution import ExecutionEnvironment, install_canister
from replica.execution.codec import canonicalize
from replica.sdk import Canister, callback, update
from state_manager.encoding import MAX_INT, MIN_INT, decode
from state_manager.ingress_history import IngressState
from state_manager.messages import RejectCode
from state_manager.state_tree import build_state_trees
from tests.execution.harness import REMOTE, new_state, run, status, submit

USES = ("return", "reply", "stable", "arg", "context")


class ValueProbe(Canister):
    """Hands ``VALUE`` (set by the test) to the system in the way its argument names."""

    VALUE: object = None

    @update
    def give(self, use):
        value = type(self).VALUE
        if use == "return":
            return value
        if use == "reply":
            self.reply(value)
        elif use == "stable":
            self.stable["v"] = value
        elif use == "arg":
            self.call(REMOTE, "m", value, on_reply=self.done, on_reject=self.done)
        else:
            self.call(REMOTE, "m", on_reply=self.done, on_reject=self.done, context=value)
        return "handed over"

    @callback
    def done(self, value, context):
        pass


ENV = ExecutionEnvironment([ValueProbe])

scalars = st.one_of(
    st.none(), st.booleans(), st.text(max_size=5), st.binary(max_size=5), st.floats(allow_nan=False),
    st.integers(MIN_INT, MAX_INT), st.integers(MAX_INT + 1, MAX_INT * 4), st.integers(MIN_INT * 4, MIN_INT - 1),
    st.just(object()), st.frozensets(st.integers(0, 3), max_size=2),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 9)), inner, max_size=3),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from(USES))
def test_any_value_is_used_or_traps_and_the_round_goes_on(value, use):
    ValueProbe.VALUE = value
    state = new_state()
    install_canister(state, 1, ValueProbe)
    message = submit(state, 1, "give", use)
    after = submit(state, 1, "give", "return", n=1)  # the next message still runs
    run(ENV, state)
    answer = status(state, message)
    assert answer.state in (IngressState.REPLIED, IngressState.REJECTED, IngressState.PROCESSING)
    if answer.state is IngressState.REJECTED:
        assert answer.reject_code is RejectCode.CANISTER_ERROR
        assert "v" not in state.canisters[1].stable and not state.canisters[1].callbacks
    if use in ("return", "reply") and answer.state is IngressState.REPLIED:
        assert decode(answer.reply) == canonicalize(value)
    if use == "stable" and answer.state is IngressState.REPLIED:
        assert state.canisters[1].stable["v"] == value
    assert status(state, after).state in (IngressState.REPLIED, IngressState.REJECTED)
    build_state_trees(state).full.digest()  # whatever was kept hashes
