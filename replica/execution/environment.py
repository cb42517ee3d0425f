"""``ExecutionEnvironment``: the execution layer behind ``message_routing``'s Protocol.

One round = the management canister's queued ingress first (``management``), then the
scheduler's canister order (see ``scheduler``), each canister consuming its inducted messages
one by one through ``message_execution``, then the calls those canisters made to the
management canister (``management_requests``: ``raw_rand``, from the round's randomness).
Everything a round does is a function of the state, the randomness, the limits and the
code: no clock, no other randomness, no iteration over unordered containers.

The code of a canister (``ExecutionEnvironment.resolve``) is either a *builtin* class known
to the process, found in the ``CanisterRegistry`` by the state's ``module_name`` and
``module_hash``, or — when the state holds its ``module_source`` — the class loaded from that
source (``source_modules``), compiled once per module hash and cached in the environment,
outside the replicated state. So any replica of any process replays source canisters from
the state alone.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from message_routing.limits import DEFAULT, Limits
from state_manager.canister_state import CanisterState
from state_manager.messages import Ingress, Reject, Reply, Request, Response
from state_manager.replicated_state import ReplicatedState

from .canister import Canister
from .errors import ModuleLoadError
from .management import execute_management_ingress
from .management_requests import answer_management_requests
from .message_execution import MessageUsage, execute_ingress, instructions_counter, execute_request, execute_response
from .query import CodeResolver, run_query
from .registry import RegistryLike, as_registry
from .scheduler import canister_schedule, pop_next_input
from .source_modules import SourceModules

__all__ = ["ExecutionEnvironment", "execute_canister_messages", "execute_management_messages",
           "Observer"]

#: Called after each executed message with the canister, the message (None for a user's
#: query) and what it used; it sees the execution, it cannot change it.
Observer = Callable[[int, Any, MessageUsage], None]


def execute_management_messages(state: ReplicatedState, modules: SourceModules, budget: int,
                                limits: Limits = DEFAULT, instructions: int | None = None,
                                observer: Observer | None = None) -> tuple[int, int]:
    """Execute up to ``budget`` queued calls to the management canister, starting none once
    ``instructions`` (default: the round's) are used; ``(how many ran, instructions used)``.
    ``observer``, if given, sees each install's usage (kind ``"install"``) under the
    installed canister's id."""
    allowance = limits.max_instructions_per_round if instructions is None else instructions
    queue = state.management_queue
    executed = used = 0
    while executed < budget and used < allowance and queue.elements:
        ingress = queue.pop()
        usage = execute_management_ingress(state, ingress, modules, limits)
        used += usage.instructions
        if observer is not None and usage.canister_id is not None and usage.instructions:
            observer(usage.canister_id, ingress, usage)
        executed += 1
    return executed, used


def execute_canister_messages(
    state: ReplicatedState, code: CodeResolver, canister_id: int, budget: int, limits: Limits,
    instructions: int | None = None, observer: Observer | None = None,
) -> tuple[int, int]:
    """Execute up to ``budget`` of the canister's inducted messages, starting none once
    ``instructions`` (default: the round's) are used; ``(how many ran, instructions used)``.
    The instructions are added to the canister's counter (``instructions_counter``);
    ``observer``, if given, sees each message's ``MessageUsage``."""
    allowance = limits.max_instructions_per_round if instructions is None else instructions
    canister = state.canisters[canister_id]
    cls = code.resolve(canister)
    queues = canister.queues
    executed = used = 0
    while executed < budget and used < allowance:
        message = pop_next_input(queues)
        if message is None:
            break
        kind = type(message)
        usage = None if observer is None else MessageUsage("callback" if kind is Response else "update")
        one = 0
        if kind is Request:
            one = execute_request(state, canister, cls, message, limits, usage)
        elif kind is Response:
            one = execute_response(state, canister, cls, message, limits, usage)
        elif kind is Ingress:
            one = execute_ingress(state, canister, cls, message, limits, usage)
        else:
            state.metadata.count("critical_errors")  # queues hold nothing else
        used += one
        if usage is not None:
            observer(canister_id, message, usage)
        executed += 1
    if used:   # once for all the messages (the same total as one count per message)
        state.metadata.count(instructions_counter(canister_id), used)
    return executed, used


class ExecutionEnvironment:
    """Runs canisters on a subnet's state: builtin classes (see ``CanisterRegistry``) and
    source canisters (loaded from the state, cached in ``modules``)."""

    __slots__ = ("registry", "modules", "limits", "observer")

    def __init__(self, canisters: RegistryLike = ()) -> None:
        self.registry = as_registry(canisters)
        self.modules = SourceModules()
        #: The limits of the latest round: a module loaded again (after a restart, for a
        #: replay) runs its body under the install limit it was installed with.
        self.limits = DEFAULT
        #: Sees every message executed while it is set (``observed_by``); never the state.
        self.observer: Observer | None = None

    @contextmanager
    def observed_by(self, observer: Observer | None) -> Iterator[None]:
        """Run the rounds and queries inside the block with ``observer`` seeing each message
        (a node's metrics, a trace's replay). One environment may serve several nodes of a
        process, one after the other: each sets its own observer while it executes."""
        previous, self.observer = self.observer, observer
        try:
            yield
        finally:
            self.observer = previous

    def resolve(self, canister: CanisterState) -> type[Canister] | None:
        """The class that runs ``canister``: loaded from its source if the state holds one,
        else the registered builtin class; None if neither is available (or it has no code)."""
        source = canister.module_source
        if source:
            try:
                return self.modules.load(source, canister.module_name, canister.module_hash, self.limits)
            except ModuleLoadError:
                return None  # it loaded at install; a replica that cannot load it now is broken
        return self.registry.resolve(canister)

    def execute_round(self, state: ReplicatedState, randomness: bytes, limits: Limits) -> ReplicatedState:
        """Execute at most ``max_messages_per_round`` messages: the management canister's
        first, then at most ``max_messages_per_canister_per_round`` per canister, in the
        scheduler's order. No message starts once the round's messages used
        ``max_instructions_per_round`` instructions; one that started runs to its end or its
        own limit, and the scheduler's rotation lets the next canister start first next
        round. Last, the calls to the management canister that the canisters which ran made
        are answered (``management_requests``; ``raw_rand`` draws on ``randomness``)."""
        self.limits = limits
        remaining = limits.max_messages_per_round
        instructions = limits.max_instructions_per_round
        executed, used = execute_management_messages(state, self.modules, remaining, limits, instructions,
                                                     self.observer)
        remaining -= executed
        instructions -= used
        per_canister = limits.max_messages_per_canister_per_round
        ran: list[int] = []
        for canister_id in canister_schedule(state):
            if remaining <= 0 or instructions <= 0:
                break
            executed, used = execute_canister_messages(
                state, self, canister_id, min(per_canister, remaining), limits, instructions, self.observer)
            remaining -= executed
            instructions -= used
            if executed:
                ran.append(canister_id)
        if ran:
            canisters = state.canisters
            answer_management_requests((canisters[c] for c in sorted(ran) if c in canisters), randomness)
        return state

    def run_query(
        self, state: ReplicatedState, canister_id: int, method: str, arg: Any = None, caller: bytes | int = b"",
        limits: Limits = DEFAULT, usage: MessageUsage | None = None,
    ) -> Reply | Reject:
        """``query.run_query`` with this environment's code; ``usage``, if given, receives
        what it used (a query thread passes its own rather than share ``observer``). The
        observer, if one is set, sees it too."""
        observer = self.observer
        if observer is None:
            return run_query(self, state, canister_id, method, arg, caller, limits, usage)
        usage = MessageUsage("query") if usage is None else usage
        answer = run_query(self, state, canister_id, method, arg, caller, limits, usage)
        observer(canister_id, None, usage)
        return answer
