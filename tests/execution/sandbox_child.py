"""Run sandboxed canister programs and print what every replica must agree on (a child process).

    python -m tests.execution.sandbox_child < programs.json

Input: ``[[source, class name, [[method, arg], ...]], ...]``. For each program, a fresh
subnet state: install the source through ``install_code``, execute the calls as ingress
messages, then print one JSON line: per call the answer (reply value or reject text) and
the instructions it used, the install's instructions, and the state's full hash. The tests
start this with different ``PYTHONHASHSEED`` values and compare the lines.
"""

from __future__ import annotations

import json
import sys

from message_routing.limits import DEFAULT
from replica.execution import ExecutionEnvironment
from replica.execution.management import InstallUsage, install_code
from replica.execution.message_execution import execute_ingress
from replica.sdk import decode_payload, encode_value
from state_manager.canister_state import CanisterState
from state_manager.ingress_history import IngressState
from state_manager.messages import Ingress
from state_manager.replicated_state import ReplicatedState
from state_manager.state_tree import build_state_trees
from tests.builders import A, topology

USER = b"\x07" * 29 + b"\x02"


def run_program(source: str, class_name: str, calls: list, limits=DEFAULT) -> dict:
    state = ReplicatedState(A, topology())
    state.metadata.batch_time = 10**9
    env = ExecutionEnvironment()
    state.add_canister(CanisterState(0, "", b"", controller=USER))
    usage = InstallUsage()
    try:
        install_code(state, env.modules, USER, 0, "install", source, class_name, None, limits=limits, usage=usage)
        installed = "ok"
    except Exception as exc:  # noqa: BLE001 - the refusal is part of what replicas must agree on
        installed = f"{type(exc).__name__}: {exc}"
    answers = []
    if installed == "ok":
        canister = state.canisters[0]
        cls = env.resolve(canister)
        for n, (method, arg) in enumerate(calls):
            ingress = Ingress(USER, 0, method, encode_value(arg), n.to_bytes(32, "big"), 50 * 10**9)
            used = execute_ingress(state, canister, cls, ingress, limits)
            status = state.ingress_history.get(ingress.message_id)
            if status.state is IngressState.REPLIED:
                answers.append(["reply", repr(decode_payload(status.reply)), used])
            else:
                answers.append(["reject", status.reject_message, used])
    return {"installed": installed, "install_instructions": usage.instructions, "answers": answers,
            "state_hash": build_state_trees(state).full_hash.hex()}


def main() -> None:
    programs = json.load(sys.stdin)
    for source, class_name, calls in programs:
        print(json.dumps(run_program(source, class_name, calls)))


if __name__ == "__main__":
    main()
