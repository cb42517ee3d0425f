"""Calls to the management canister through an ``Agent``: create a canister, install code,
read its log.

All are update calls to ``MANAGEMENT_CANISTER_ID``; the agent waits for their certified,
verified answers (``Agent.update_call``). ``create_canister`` is executed by the subnet it is
sent to, ``install_code`` and ``fetch_canister_logs`` by the subnet that hosts the canister
(the registry says which).

    canister_id = create_canister(agent, "subnet-0")
    install_code(agent, canister_id, source, "Greeter")            # mode "install"
    install_code(agent, canister_id, new_source, "Greeter", mode="upgrade")
    ids = install_many(agent, [("subnet-0", source, "Greeter", None), ("subnet-1", …)])
    for record in fetch_canister_logs(agent, canister_id): print(record.index, record.content)

A canister module is Python source; ``read_module("greeter.py:Greeter")`` reads one from a
file. The module runs on the replicas as it is (no sandbox): install only your own code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from state_manager.messages import MANAGEMENT_CANISTER_ID

from .agent import Agent
from .agent_errors import AgentError, UnexpectedAnswer

__all__ = [
    "MANAGEMENT_CANISTER_ID", "ModuleSpecError", "create_canister", "install_code", "read_module",
    "install_many", "install_code_request", "created_canister_id", "installed_module_hash",
    "CanisterLogRecord", "fetch_canister_logs", "canister_log_records",
]


class ModuleSpecError(AgentError):
    """A ``PATH.py:ClassName`` that names no readable file or no class."""


def read_module(spec: str) -> tuple[str, str, Path]:
    """``"PATH.py:ClassName"`` → ``(source text, class name, path)``."""
    path_text, sep, class_name = spec.rpartition(":")
    if not sep or not path_text or not class_name:
        raise ModuleSpecError(f"{spec!r} is not PATH.py:ClassName")
    if not all(part.isidentifier() for part in class_name.split(".")):
        raise ModuleSpecError(f"{class_name!r} is not a Python class name")
    path = Path(path_text)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModuleSpecError(f"cannot read {path}: {exc}") from exc
    return source, class_name, path


def create_canister(agent: Agent, subnet: str, timeout_s: float = 30.0) -> int:
    """A new, empty canister on ``subnet`` controlled by the agent's identity: its id."""
    return created_canister_id(agent.update_call(MANAGEMENT_CANISTER_ID, "create_canister", None, timeout_s,
                                                 subnet=subnet))


def install_code(agent: Agent, canister_id: int, source: str, class_name: str, arg: Any = None, *,
                 mode: str = "install", timeout_s: float = 30.0) -> bytes:
    """Install (``mode``: install, reinstall, upgrade) ``class_name`` of ``source`` on
    ``canister_id``; the module hash the subnet certified it with (SHA-256 of the source)."""
    subnet = agent.subnet_of(canister_id)
    answer = agent.update_call(MANAGEMENT_CANISTER_ID, "install_code",
                               install_code_request(canister_id, source, class_name, arg, mode), timeout_s,
                               subnet=subnet)
    return installed_module_hash(answer)


def install_many(agent: Agent, modules: Sequence[tuple[str, str, str, Any]], timeout_s: float = 60.0) -> list[int]:
    """Create a canister for each ``(subnet, source, class name, init arg)`` and install it;
    the new ids, in order. Every create is submitted before any is awaited, then every
    install: two certified round trips in all, however many canisters."""
    creating = [(agent.submit_call(MANAGEMENT_CANISTER_ID, "create_canister", None, subnet=subnet), subnet)
                for subnet, _, _, _ in modules]
    ids = [created_canister_id(agent.wait(message_id, MANAGEMENT_CANISTER_ID, timeout_s, subnet=subnet))
           for message_id, subnet in creating]
    installing = [
        (agent.submit_call(MANAGEMENT_CANISTER_ID, "install_code",
                           install_code_request(canister_id, source, class_name, arg), subnet=subnet), subnet)
        for canister_id, (subnet, source, class_name, arg) in zip(ids, modules)]
    for message_id, subnet in installing:
        installed_module_hash(agent.wait(message_id, MANAGEMENT_CANISTER_ID, timeout_s, subnet=subnet))
    return ids


def install_code_request(canister_id: int, source: str, class_name: str, arg: Any = None,
                         mode: str = "install") -> dict:
    """The argument of an ``install_code`` call (for callers that submit and await themselves)."""
    return {"canister_id": canister_id, "mode": mode, "source": source, "class_name": class_name, "arg": arg}


def created_canister_id(answer: Any) -> int:
    """The canister id in a ``create_canister`` answer (``UnexpectedAnswer`` if there is none)."""
    canister_id = answer.get("canister_id") if isinstance(answer, dict) else None
    if type(canister_id) is not int:
        raise UnexpectedAnswer(f"create_canister answered {answer!r}")
    return canister_id


def installed_module_hash(answer: Any) -> bytes:
    """The module hash in an ``install_code`` answer (``UnexpectedAnswer`` if there is none)."""
    module_hash = answer.get("module_hash") if isinstance(answer, dict) else None
    if not isinstance(module_hash, bytes):
        raise UnexpectedAnswer(f"install_code answered {answer!r}")
    return module_hash


@dataclass(frozen=True)
class CanisterLogRecord:
    """One record of a canister's log: its index, the batch time it was logged at (ns), its text."""

    index: int
    timestamp_nanos: int
    content: str


def fetch_canister_logs(agent: Agent, canister_id: int, timeout_s: float = 30.0) -> list[CanisterLogRecord]:
    """The log of ``canister_id`` (the agent's identity must control it), oldest record first."""
    answer = agent.update_call(MANAGEMENT_CANISTER_ID, "fetch_canister_logs", {"canister_id": canister_id},
                               timeout_s, subnet=agent.subnet_of(canister_id))
    return canister_log_records(answer)


def canister_log_records(answer: Any) -> list[CanisterLogRecord]:
    """The records of a ``fetch_canister_logs`` answer (``UnexpectedAnswer`` if it is not one)."""
    records = answer.get("canister_log_records") if isinstance(answer, dict) else None
    if not isinstance(records, (list, tuple)):
        raise UnexpectedAnswer(f"fetch_canister_logs answered {answer!r}")
    out = []
    for record in records:
        fields = (record.get("idx"), record.get("timestamp_nanos"), record.get("content")) \
            if isinstance(record, dict) else (None, None, None)
        if type(fields[0]) is not int or type(fields[1]) is not int or type(fields[2]) is not str:
            raise UnexpectedAnswer(f"fetch_canister_logs answered a record {record!r}")
        out.append(CanisterLogRecord(*fields))
    return out
