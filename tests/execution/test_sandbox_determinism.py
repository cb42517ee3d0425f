"""Sandboxed execution is a function of the code and its inputs: generated canister programs
give the same answers, instruction counts and state hashes in processes with different hash
seeds, and the instruction limit traps at the same count everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from message_routing.limits import DEFAULT
from replica.ic.textual_ids import canister_text

from .sandbox_child import run_program

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ("0", "1", "4242")

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6)

#: Statement templates of the generated method bodies: loops, dicts, strings, sets (whose
#: built-in order would follow the hash seed), dict views, calls, comprehensions.
TEMPLATES = (
    "for i in range({n}):\n    acc = (acc * {k} + i) % 1000003",
    "for w in words:\n    d[w] = d.get(w, 0) + {k}",
    "s = set(words)\nout.append(tuple(s))",
    "out.append(tuple({{w + str(j) for j in range({n}) for w in words}}))",
    "out.append('-'.join(sorted(d)))",
    "out.append(tuple(d.keys() - {{words[0]}}))",
    "out.append(tuple(x for x in (d.keys() | set(words))))",
    "text = text + ''.join(w.upper() for w in words)",
    "out.append(helper(acc, {k}))",
    "self.stable['k{k}'] = acc % 100000",
    "out.append(repr(frozenset(words)) + f'{{acc:>8}}')",
    "while acc > {n}:\n    acc = acc // 2",
    "out.append(len([c for c in text if c in 'aeiou']))",
    "s = set()\nfor w in reversed(words):\n    s.add(w * 2)\nout.append(s.pop())",
    "out.append(text[:{k}] + text[{k}:] + text[::{k}])",
    "out.append(f'{{acc}}-{{len(d)}}-{{acc % {k}}}')",
    "out.append(tuple(sorted(words, key=lambda w: (len(w), w))))",
    "for ch in text:\n    acc = (acc * {k} + ord(ch)) % 1000003",
    "try:\n    for i in range({n}):\n        if i == {k}:\n            raise ValueError(i)\nexcept ValueError as e:\n    out.append(str(e))",
)


@st.composite
def programs(draw) -> tuple[str, list]:
    words = draw(st.lists(WORD, min_size=1, max_size=6))
    statements = draw(st.lists(st.tuples(st.sampled_from(TEMPLATES), st.integers(1, 40), st.integers(2, 9)),
                               min_size=1, max_size=6))
    body = []
    for template, n, k in statements:
        body.append(template.format(n=n, k=k))
    lines = "\n".join("        " + line for chunk in body for line in chunk.splitlines())
    source = (
        "from replica.sdk import Canister, update\n\n\n"
        "def helper(a, b):\n    return (a + b) * b % 9973\n\n\n"
        "class Gen(Canister):\n"
        "    @update\n"
        "    def run(self, words):\n"
        "        acc = 1\n        d = {}\n        out = []\n        text = ''\n"
        f"{lines}\n"
        "        return (acc, tuple(sorted(d.items())), tuple(repr(x) for x in out), text)\n"
    )
    return source, [["run", tuple(words)], ["run", tuple(reversed(words))]]


def _in_child(batch: list, seed: str) -> list[dict]:
    env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "tests.execution.sandbox_child"], input=json.dumps(batch),
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(programs(), min_size=4, max_size=4))
def test_generated_programs_agree_across_hash_seeds(batch):
    payload = [[source, "Gen", calls] for source, calls in batch]
    results = [_in_child(payload, seed) for seed in SEEDS]
    assert results[0] == results[1] == results[2]
    for result in results[0]:
        assert result["installed"] == "ok"
        assert all(kind == "reply" for kind, _, _ in result["answers"]), result["answers"]
        assert all(used > 0 for _, _, used in result["answers"])


SPIN = (
    "from replica.sdk import Canister, update\n\n\n"
    "class Spin(Canister):\n"
    "    @update\n"
    "    def spin(self, n):\n"
    "        self.stable['before'] = n\n"
    "        x = 0\n"
    "        words = {'alpha', 'bravo', 'charlie'}\n"
    "        while True:\n"
    "            for w in words:\n"
    "                x += len(w)\n"
)


def test_the_instruction_limit_traps_at_the_same_count_in_every_process():
    limits = DEFAULT.with_(max_instructions_per_message=200_000)
    here = run_program(SPIN, "Spin", [["spin", 1]], limits)
    (kind, text, used), = here["answers"]
    assert (kind, text, used) == (
        "reject", f"Canister {canister_text(0)} exceeded the instruction limit for single message execution", 200_000)
    children = [_in_child([[SPIN, "Spin", [["spin", 1]]]], seed) for seed in SEEDS]
    # The children run with the default limit: the same trap text, at that limit, and one state.
    assert len({json.dumps(c) for c in children}) == 1
    assert children[0][0]["answers"] == [["reject", text, DEFAULT.max_instructions_per_message]]


def test_instruction_counts_are_a_function_of_code_and_input():
    source = (
        "from replica.sdk import Canister, update\n\n\n"
        "class Loop(Canister):\n"
        "    @update\n"
        "    def run(self, n):\n"
        "        total = 0\n"
        "        for i in range(n):\n"
        "            total += i\n"
        "        return total\n"
    )
    result = run_program(source, "Loop", [["run", 0], ["run", 10], ["run", 20], ["run", 10]])
    counts = [used for _, _, used in result["answers"]]
    assert counts[1] == counts[3]                       # same input, same count
    assert counts[2] - counts[1] == counts[1] - counts[0] > 0   # linear in the loop's length
