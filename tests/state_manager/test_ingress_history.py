"""The indexed ``IngressHistory.prune`` behaves exactly like a scan over every status."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from state_manager.ingress_history import IngressHistory, IngressState, IngressStatus


def reference_prune(statuses: dict, now: int, forget_after: int) -> set:
    """The specification: one pass over all statuses in id order; returns the changed ids."""
    changed = set()
    for message_id in sorted(statuses):
        status = statuses[message_id]
        if status.expiry_time >= now:
            continue
        if status.state is IngressState.DONE:
            if status.expiry_time + forget_after < now:
                del statuses[message_id]
                changed.add(message_id)
        elif status.is_terminal:
            statuses[message_id] = IngressStatus(IngressState.DONE, status.receiver, status.source, now,
                                                 status.expiry_time)
            changed.add(message_id)
    return changed


OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), st.integers(0, 8), st.sampled_from(list(IngressState)), st.integers(0, 10)),
    st.tuples(st.just("prune"), st.integers(0, 15), st.integers(-3, 5)),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_prune_matches_a_full_scan(ops):
    history, model = IngressHistory(), {}
    for op in ops:
        if op[0] == "set":
            _, n, state, expiry = op
            message_id = n.to_bytes(32, "big")
            status = IngressStatus(state, 1, b"u", 0, expiry, reply=b"r" if state is IngressState.REPLIED else None)
            history.set(message_id, status)
            model[message_id] = status
        else:
            _, now, forget_after = op
            history.take_changed_ids()
            expected = reference_prune(model, now, forget_after)
            history.prune(now, forget_after)
            assert history.take_changed_ids() == sorted(expected)
        assert dict(history.statuses) == model
