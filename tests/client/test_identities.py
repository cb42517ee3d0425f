"""The identity store: keys as 0600 PEM files in a 0700 directory, the default identity made
on first use, selection, and typed refusals of bad names, existing names, unknown names,
too open, unreadable and malformed key files."""

from __future__ import annotations

import os
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from hypothesis import given
from hypothesis import strategies as st

from replica.client.identities import (
    DEFAULT_IDENTITY, HOME_ENV, IdentityExists, IdentityFileTooOpen, IdentityStore, IdentityUnreadable,
    InvalidIdentityName, UnknownIdentity, default_home,
)
from replica.client.identity import source_of


@pytest.fixture
def store(tmp_path):
    return IdentityStore(tmp_path / "home")


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_default_identity_is_created_on_first_use(store):
    assert store.list() == []
    name, principal = store.whoami()
    assert name == DEFAULT_IDENTITY and store.list() == [DEFAULT_IDENTITY]
    assert store.whoami() == (name, principal)  # the same key next time
    identity = store.load(DEFAULT_IDENTITY)
    assert principal == source_of(identity.key.public_key).hex() == identity.principal
    assert mode(store.directory / "default.pem") == 0o600 and mode(store.directory) == 0o700


def test_new_list_use_whoami(store):
    alice = store.new("alice")
    bob = store.new("bob.2")
    assert store.list() == ["alice", "bob.2"]
    assert alice.principal != bob.principal
    assert store.use("bob.2").principal == bob.principal
    assert store.whoami() == ("bob.2", bob.principal)
    assert store.load("alice").key.public_key == alice.key.public_key
    assert mode(store.directory / "alice.pem") == 0o600
    assert DEFAULT_IDENTITY not in store.list()  # nothing made a default while one is selected


def test_existing_names_are_never_overwritten(store):
    first = store.new("alice")
    with pytest.raises(IdentityExists):
        store.new("alice")
    assert store.load("alice").principal == first.principal
    assert [p.name for p in store.directory.iterdir()] == ["alice.pem"]  # no temporary file left


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "-x", ".hidden", "x" * 65, "selected", "a.pem",
                                  "a b", "ä", None, 3])
def test_bad_names_are_refused(store, name):
    with pytest.raises(InvalidIdentityName):
        store.new(name)
    with pytest.raises(InvalidIdentityName):
        store.load(name)


@given(st.text(max_size=70))
def test_names_are_checked_before_any_file_is_touched(tmp_path_factory, name):
    store = IdentityStore(tmp_path_factory.mktemp("fuzz"))
    try:
        identity = store.new(name)
    except InvalidIdentityName:
        assert not store.directory.exists() or store.list() == []
        return
    assert store.list() == [name] and (store.directory / f"{name}.pem").parent == store.directory
    assert identity.name == name


def test_unknown_identities_are_refused(store):
    with pytest.raises(UnknownIdentity):
        store.load("nobody")
    with pytest.raises(UnknownIdentity):
        store.use("nobody")


@pytest.mark.parametrize("open_mode", [0o644, 0o640, 0o604, 0o660, 0o602])
def test_too_open_key_files_are_refused(store, open_mode):
    store.new("alice")
    os.chmod(store.directory / "alice.pem", open_mode)
    with pytest.raises(IdentityFileTooOpen):
        store.load("alice")


def test_unreadable_and_malformed_key_files_are_refused(store):
    store.new("alice")
    store.directory.joinpath("garbage.pem").write_bytes(b"not a key")
    store.directory.joinpath("rsa.pem").write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    store.directory.joinpath("folder.pem").mkdir()
    store.directory.joinpath("huge.pem").write_bytes(b"x" * 100_000)
    os.symlink(store.directory / "alice.pem", store.directory / "link.pem")
    for name in ("garbage", "rsa", "folder", "huge", "link"):
        path = store.directory / f"{name}.pem"
        if path.is_file() and not path.is_symlink():
            os.chmod(path, 0o600)
        with pytest.raises(IdentityUnreadable):
            store.load(name)


def test_a_tampered_selection_is_refused(store):
    store.use(store.new("alice").name)
    (store.directory / "selected").write_text("../../etc/passwd\n")
    with pytest.raises(InvalidIdentityName):
        store.whoami()


def test_the_home_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "elsewhere"))
    assert default_home() == tmp_path / "elsewhere"
    assert IdentityStore().directory == tmp_path / "elsewhere" / "identities"
    monkeypatch.delenv(HOME_ENV)
    assert default_home().parts[-2:] == (".config", "replica")
