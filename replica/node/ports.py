"""A node's addresses outlive its restarts: a node process binds the ports it had before.

A node records the ports it bound (``ports.json`` in its directory, ``NodeFiles.ports``:
``{"xnet": port, "agreement": port, "http": port}``) and, restarted, asks for the same ones
again (``bind_again``), as a real node's address outlives a restart: peers and clients that
knew it reach it again without re-reading anything. Only a port that another process took
meanwhile is given up for a new one; the node's ``endpoints.json`` says so, and from it the
launcher rewrites the registry and ``http/<subnet>.json``, which peers and agents re-read.

The servers set SO_REUSEADDR (gRPC always; aiohttp by default on POSIX) and not SO_REUSEPORT
(``grpc.so_reuseport`` is 0): the port of a SIGKILLed node whose connections linger in
TIME_WAIT is had again at once, while a port another process listens on is never shared.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Callable, TypeVar

from state_manager.durable_files import write_atomically

__all__ = ["SERVICES", "read_ports", "write_ports", "bind_again"]

_log = logging.getLogger(__name__)

#: The services a node binds, each on a port of its own.
SERVICES = ("xnet", "agreement", "http")

T = TypeVar("T")


def read_ports(path: Path) -> dict[str, int]:
    """The ports recorded in ``path`` (none if it is missing; an unusable file is logged and
    taken for none: the node then binds new ports, which is always safe)."""
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _log.warning("%s is unreadable (%s): binding new ports", path, exc)
        return {}
    if not isinstance(value, dict):
        _log.warning("%s is not a JSON object: binding new ports", path)
        return {}
    return {service: port for service, port in value.items()
            if service in SERVICES and type(port) is int and 0 < port < 65536}


def write_ports(path: Path, ports: dict[str, int]) -> None:
    """Record the bound ports (durably: a SIGKILL right after must not lose them)."""
    write_atomically(path, json.dumps(ports, sort_keys=True).encode())


def bind_again(service: str, previous: int | None, bind: Callable[[int], T]) -> T:
    """``bind(previous)``, or ``bind(0)`` (any free port) when there is no previous port or
    it is taken (``OSError``)."""
    if previous:
        try:
            return bind(previous)
        except OSError as exc:
            _log.warning("%s port %d is taken (%s): binding a new one; the new address is published",
                         service, previous, exc)
    return bind(0)
