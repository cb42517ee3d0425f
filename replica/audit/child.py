"""``python -m replica.audit.child``: the replay subprocess of ``isolation``.

Reads one request (mode, run-log blob, work items) from stdin, checks it runs under the
hash seed it was started with, replays with ``executor`` (or generates a workload) and
writes the answer to stdout.
"""

from __future__ import annotations

import os
import sys

from .errors import IsolationError
from .executor import replay_replica, replay_to_state
from .inputs import prepare_run
from .isolation import decode_request, encode_answer
from .run_log import decode_run_log, encode_run_log
from .workload import WorkloadConfig, generate_run
from .worker import tune_gc


def main() -> int:
    mode, seed, blob, items = decode_request(sys.stdin.buffer.read())
    if os.environ.get("PYTHONHASHSEED") != str(seed):
        raise IsolationError(f"the child was asked for PYTHONHASHSEED={seed} but runs with "
                             f"{os.environ.get('PYTHONHASHSEED')!r}")
    rows: list = []
    if mode == "generate":
        (config,) = items
        rows.append((encode_run_log(generate_run(WorkloadConfig(*config))),))
        sys.stdout.buffer.write(encode_answer(rows))
        return 0
    wanted = tuple(sorted({item[1] for item in items}))
    run = prepare_run(decode_run_log(blob), wanted)
    tune_gc()
    if mode == "rows":
        for replica, subnet, perturbation in items:
            rows.extend(replay_replica(run, replica, subnet, perturbation))
    else:
        for request, subnet, perturbation, height in items:
            rows.append(replay_to_state(run, request, subnet, perturbation, height))
    sys.stdout.buffer.write(encode_answer(rows))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
