"""``python -m replica.audit.child``: the replay subprocess of ``isolation``.

Reads one request (mode, run-log blob, work items) from stdin, checks it runs under the
hash seed it was started with, replays with ``executor`` and
writes the answer to stdout (rows carry this child's own build fingerprint).
"""

from __future__ import annotations

import sys

from .build import current_build
from .executor import replay_replica, replay_to_state, with_build
from .inputs import prepare_run
from .isolation import check_child_hash_seed, decode_request, encode_answer
from .run_log import decode_run_log
from .worker import tune_gc


def main() -> int:
    mode, seed, blob, items = decode_request(sys.stdin.buffer.read())
    check_child_hash_seed(seed)
    rows: list = []
    wanted = tuple(sorted({item[1] for item in items}))
    run = prepare_run(decode_run_log(blob), wanted)
    tune_gc()
    if mode == "rows":
        for replica, subnet, perturbation in items:
            rows.extend(with_build(replay_replica(run, replica, subnet, perturbation), current_build().fingerprint))
    else:
        for request, subnet, perturbation, height in items:
            rows.append(replay_to_state(run, request, subnet, perturbation, height))
    sys.stdout.buffer.write(encode_answer(rows))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
