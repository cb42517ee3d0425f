"""``Testnet.fork`` (issue 26, part 2) as an app developer uses it: fork a recorded live run
into a temporary directory, find the canisters and values of that height there, answer calls
and dry runs on it, and ``close`` stops it. The node-process details (hashes every node
started from, the source untouched byte for byte) are ``tests/integration/test_fork.py``'s."""

from __future__ import annotations

import shutil

import pytest

from replica.processes import lifecycle
from replica.testing import Testnet
from replica.testnet import launcher

from .apps import Greeter


@pytest.mark.slow
def test_fork_a_recorded_run_and_use_it(tmp_path):
    with Testnet(subnets=1, nodes=1, mode="live", directory=tmp_path / "source", round_ms=20) as net:
        greeter = net.install(Greeter)
        assert net.update_call(greeter, "greet", "a") == "hello, a"
        net.tick(5)
        height = lifecycle.status(tmp_path / "source")[0].height
        net.tick(5)
        assert net.update_call(greeter, "greet", "b") == "hello, b"   # after the fork height
        net.tick(2)
    recorded = net.run_log()

    fork = Testnet.fork(tmp_path / "source", height)   # a temporary directory
    try:
        assert fork.mode == "live" and fork.subnets == ["subnet-0"]
        report = fork.fork_report
        assert [(s.subnet_id, s.height, s.full_hash) for s in report.subnets] == \
            [("subnet-0", height, recorded.subnet("subnet-0").hashes[height - 1][1])]
        assert fork.query_call(greeter, "greeted") == 1              # "b" came after the fork height
        assert fork.dry_run(greeter, "greet", "c").status == "replied"
        assert fork.query_call(greeter, "greeted") == 1
        assert fork.update_call(greeter, "greet", "d") == "hello, d"
        assert fork.query_call(greeter, "greeted") == 2
        directory = fork.directory
    finally:
        fork.close()
    assert lifecycle.running_launcher(launcher.TestnetLayout(directory)) is None   # close stopped it
    assert launcher.TestnetLayout(directory).run.is_dir()
    shutil.rmtree(directory)
