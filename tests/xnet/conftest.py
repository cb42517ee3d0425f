"""Shared fixtures for XNet transport tests: node identities valid right now."""

from __future__ import annotations

import datetime

import pytest

from consensus_stub.node_keys import generate_node_identity


def make_identity(node_id: str):
    # TLS checks certificate validity against the wall clock, so start slightly in the past.
    not_before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    return generate_node_identity(node_id, not_before)


@pytest.fixture(scope="session")
def identities():
    return {name: make_identity(name) for name in ("server", "server2", "client", "stranger")}
