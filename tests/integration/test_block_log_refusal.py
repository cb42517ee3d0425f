"""A subnet never starts on a block log it cannot trust: a corrupt log, or one behind the
height it had finalized, stops it with a typed error (every time, file untouched) instead of
silently re-making finalized heights; the testnet's subnet process exits with EXIT_REFUSED."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import pytest

from consensus_stub.block_store import BlockLogBehind, CorruptBlockLog
from replica.testnet import launcher as tn
from replica.processes import supervisor as sv
from tests.integration.harness import ALPHA, make_testnet

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def logged(tmp_path):
    """A block log directory after four heights, and the genesis time to rebuild the testnet."""
    genesis_time = time.time_ns()
    with make_testnet(block_log_dir=tmp_path, genesis_time=genesis_time) as net:
        for _ in range(4):
            net.step()
        assert net.subnets[ALPHA].height == 4
    return tmp_path, genesis_time


def _refused_twice(directory, genesis_time, error):
    path = directory / f"{ALPHA}.blocks"
    before = path.read_bytes()
    for _ in range(2):   # a relaunch after a refused start is refused again, the chain unchanged
        with pytest.raises(error):
            make_testnet(block_log_dir=directory, genesis_time=genesis_time)
        assert path.read_bytes() == before


def test_a_subnet_on_a_corrupt_block_log_refuses_to_start(logged):
    directory, genesis_time = logged
    path = directory / f"{ALPHA}.blocks"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10     # one flipped byte in a middle record
    path.write_bytes(bytes(data))
    _refused_twice(directory, genesis_time, CorruptBlockLog)


def test_a_subnet_whose_log_is_behind_its_finalized_height_refuses_to_start(logged, tmp_path_factory):
    directory, genesis_time = logged
    path = directory / f"{ALPHA}.blocks"
    older = tmp_path_factory.mktemp("older")
    with make_testnet(block_log_dir=older, genesis_time=genesis_time) as net:
        net.step()
    path.write_bytes((older / f"{ALPHA}.blocks").read_bytes())   # "restored" from an older copy
    _refused_twice(directory, genesis_time, BlockLogBehind)


def test_the_subnet_process_exits_with_exit_refused_and_says_why(tmp_path):
    layout = tn.create_testnet(tmp_path / "net", 2, 2, seed=b"block-log-refusal-seed-32-bytes!", tick_s=0.1, process_model="subnet")
    path = layout.blocks("subnet-0")
    path.parent.mkdir(parents=True, exist_ok=True)
    damaged = b"blocklog" + (2).to_bytes(4, "big") + b"garbage, not a record"
    path.write_bytes(damaged)
    result = subprocess.run([sys.executable, "-m", "replica.processes.subnet_process", str(layout.root), "subnet-0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == tn.EXIT_REFUSED == 3
    assert "refused to start" in result.stderr and f"block log {path} is corrupt at record 0" in result.stderr
    assert "do not restart" in result.stderr
    assert path.read_bytes() == damaged


def test_the_launcher_stops_on_a_refusal_and_names_the_log(tmp_path):
    layout = tn.create_testnet(tmp_path / "net", 2, 2, seed=b"block-log-refusal-seed-32-bytes!", tick_s=0.1, process_model="subnet")
    path = layout.blocks("subnet-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    damaged = b"blocklog" + (2).to_bytes(4, "big") + b"garbage, not a record"
    path.write_bytes(damaged)
    with pytest.raises(tn.TestnetError, match="refused to start") as info:
        sv.launch(layout.root, duration_s=5.0, settle_timeout_s=10, stream=io.StringIO())
    assert str(layout.log("subnet-1")) in str(info.value)
    assert f"block log {path} is corrupt at record 0" in layout.log("subnet-1").read_text()
    assert path.read_bytes() == damaged
