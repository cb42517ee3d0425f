"""The example apps installed on a running testnet the way a user installs theirs.

``install_example_apps(agent, subnets)`` creates, on every subnet, a counter, a ping-pong
player and a ledger whose initial tokens belong to the subnet's demo user (``user_key``),
each through ``create_canister`` + ``install_code`` with the module's source — the path of
``replica canister install``, with every answer certified and verified by the agent. Nothing
about the apps is known to the testnet beforehand: the ids are whatever the subnets allocate.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Iterable

import examples.counter
import examples.ledger
import examples.ping_pong
from examples.ledger import account_of
from replica.client.agent import Agent
from replica.client.identity import source_of
from replica.client.management import install_many
from replica.progress import Progress

from replica.testnet.launcher import INITIAL_BALANCE, user_key

__all__ = ["ExampleApps", "install_example_apps", "initial_supply"]


@dataclass(frozen=True)
class ExampleApps:
    """The example canisters of one subnet."""

    subnet: str
    counter: int
    pinger: int
    ledger: int


def _modules(subnet: str) -> list[tuple[ModuleType, str, Any]]:
    """(module, class, init argument) of the apps of ``subnet``, in ``ExampleApps`` field order."""
    holder = account_of(source_of(user_key(subnet)))
    return [(examples.counter, "Counter", None), (examples.ping_pong, "PingPong", None),
            (examples.ledger, "Ledger", {"balances": ((holder, INITIAL_BALANCE),)})]


def install_example_apps(agent: Agent, subnets: Iterable[str], progress: Progress | None = None, *,
                         timeout_s: float = 60.0) -> dict[str, ExampleApps]:
    """Install the three example apps on every subnet (module docstring) with
    ``install_many``; the agent's identity becomes their controller."""
    subnets = list(subnets)
    ids = install_many(agent, [(subnet, inspect.getsource(module), class_name, arg)
                               for subnet in subnets for module, class_name, arg in _modules(subnet)], timeout_s)
    if progress is not None:
        progress.update(f"{len(ids)} canisters installed")
    return {subnet: ExampleApps(subnet, *ids[3 * k:3 * k + 3]) for k, subnet in enumerate(subnets)}


def initial_supply(apps: dict[str, ExampleApps]) -> int:
    """The tokens the ledgers were installed with."""
    return INITIAL_BALANCE * len(apps)
