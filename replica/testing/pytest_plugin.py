"""The pytest plugin (entry point ``pytest11``, named as this module): testnets as fixtures.

* ``testnet`` — a fresh deterministic ``Testnet`` per test, 2 subnets × 1 node unless the
  test says otherwise with ``@pytest.mark.testnet(subnets=3, nodes=4, seed=7, limits=...)``;
* ``live_testnet`` — a live one (``replica testnet up`` in a temporary directory, stopped
  after the test), 2 × 1 unless ``@pytest.mark.live_testnet(subnets=..., nodes=...)``;
* ``--replica-seed N`` — the seed of every testnet whose marker names none (default 0);
  ``replica_seed`` is that value as a fixture.

When a test that used ``testnet`` fails, its report gets a "replica testnet" section with
the seed and the run log saved for ``replica replay-one`` (a live testnet writes its run
log to ``DIR/run`` as it stops; the section names it, and the directory is kept).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from .testnet import Testnet

__all__ = ["testnet", "live_testnet", "replica_seed"]

_NETS = pytest.StashKey[list]()
_FAILED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("replica", "replica.testing testnets")
    group.addoption("--replica-seed", default="0", metavar="SEED",
                    help="seed of every testnet fixture whose marker names none (default 0)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "testnet(subnets=2, nodes=1, seed=None, limits=None): "
                                       "the shape of the deterministic `testnet` fixture")
    config.addinivalue_line("markers", "live_testnet(subnets=2, nodes=1, round_ms=100): "
                                       "the shape of the `live_testnet` fixture")


def _seed(text: str) -> int | str:
    return int(text) if re.fullmatch(r"-?\d+", text) else text


@pytest.fixture
def replica_seed(request: pytest.FixtureRequest) -> int | str:
    """The ``--replica-seed`` value (an int if it is one)."""
    # A default as well: the fixtures also work imported by a conftest, without the option.
    return _seed(str(request.config.getoption("--replica-seed", default="0")))


def _options(request: pytest.FixtureRequest, marker: str, seed: int | str) -> dict:
    options = {"subnets": 2, "nodes": 1, "seed": seed}
    found = request.node.get_closest_marker(marker)
    if found is not None:
        if found.args:
            raise pytest.UsageError(f"@pytest.mark.{marker} takes keyword arguments only")
        options.update(found.kwargs)
    return options


def _remember(request: pytest.FixtureRequest, net: Testnet) -> None:
    request.node.stash.setdefault(_NETS, []).append(net)


@pytest.fixture
def testnet(request: pytest.FixtureRequest, replica_seed: int | str) -> Iterator[Testnet]:
    """A fresh deterministic testnet (module docstring)."""
    with Testnet(**_options(request, "testnet", replica_seed)) as net:
        _remember(request, net)
        yield net


@pytest.fixture
def live_testnet(request: pytest.FixtureRequest, replica_seed: int | str) -> Iterator[Testnet]:
    """A live testnet in a temporary directory, stopped after the test; the directory is
    removed after a passing test and kept (logs, run log) after a failing one."""
    with Testnet(mode="live", **_options(request, "live_testnet", replica_seed)) as net:
        _remember(request, net)
        yield net
    if not request.node.stash.get(_FAILED, False) and getattr(net._net, "temporary", False):
        shutil.rmtree(net._net.directory, ignore_errors=True)


def _describe(item: pytest.Item, net: Testnet) -> str:
    lines = [f"mode: {net.mode}", f"seed: {net.seed!r} (rerun with --replica-seed {net.seed})"]
    if net.mode == "live":
        lines.append(f"testnet directory: {net.directory} (its run log is written to {net.directory}/run as it stops)")
        return "\n".join(lines)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-80:]
    directory = Path(tempfile.mkdtemp(prefix=f"replica-run-{name}-"))
    try:
        net.save_run_log(directory)
    except Exception as exc:  # noqa: BLE001 - the report must not hide the test's own failure
        lines.append(f"run log: not saved ({type(exc).__name__}: {exc})")
        return "\n".join(lines)
    lines.append(f"run log: {directory}")
    lines += [f"replay: replica replay-one {directory} --subnet {subnet}" for subnet in net.subnets]
    return "\n".join(lines)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    if report.when == "call" and report.failed:
        for net in item.stash.get(_NETS, []):
            report.sections.append(("replica testnet", _describe(item, net)))
    return report
