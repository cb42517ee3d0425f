"""``state_manager.sha256``: the C helper and the hashlib fallback give hashlib's digests."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state_manager import sha256
from state_manager.sha256 import sha256_of, sha256_of_hashlib

PURE_BUILD = os.environ.get("SUBNET_REPLICA_PURE_PYTHON") == "1"
IMPLEMENTATIONS = [sha256_of, sha256_of_hashlib]


def reference(*parts: bytes) -> bytes:
    return hashlib.sha256(b"".join(parts)).digest()


@pytest.mark.skipif(PURE_BUILD, reason="SUBNET_REPLICA_PURE_PYTHON=1 asked for a build without C helpers")
def test_the_c_helper_is_built_and_used():
    assert sha256.IMPLEMENTATION == "openssl", "state_manager._sha256 did not build: run `make setup`"
    assert sha256_of is not sha256_of_hashlib


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.binary(max_size=200), max_size=6))
def test_digest_of_the_concatenation(implementation, parts):
    assert implementation(*parts) == reference(*parts)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_known_vectors_and_sizes(implementation):
    assert implementation().hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert implementation(b"a", b"bc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    for size in (55, 56, 63, 64, 65, 1 << 20):
        data = bytes(range(256)) * (size // 256) + bytes(size % 256)
        assert implementation(data[:7], data[7:]) == reference(data)


def test_bytes_subclasses_hash_as_their_bytes():
    class Label(bytes):
        pass

    assert sha256_of(Label(b"xy"), b"z") == reference(b"xyz")


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("bad", ["text", 7, None, [b"x"]])
def test_non_bytes_is_a_type_error_and_leaves_no_trace(implementation, bad):
    with pytest.raises(TypeError):
        implementation(b"prefix", bad)
    assert implementation(b"abc") == reference(b"abc")  # the C helper's shared context is whole again


def test_threads_get_their_own_digests():
    errors: list[str] = []

    def work(seed: int) -> None:
        for n in range(2000):
            part = f"{seed}/{n}".encode()
            if sha256_of(part, part) != reference(part, part):
                errors.append(f"thread {seed}, item {n}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
