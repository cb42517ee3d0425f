"""The identity store: Ed25519 and secp256k1 keys as 0600 PKCS#8 PEM files in a 0700 directory,
principals in the IC's textual form, the default identity made on first use, selection, the
command line, and typed refusals of bad names, key types, existing names, unknown names, too
open, unreadable and malformed key files."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from hypothesis import given
from hypothesis import strategies as st

from replica.cli import main
from replica.client.identities import (
    DEFAULT_IDENTITY, HOME_ENV, IdentityExists, IdentityFileTooOpen, IdentityStore, IdentityUnreadable,
    InvalidIdentityName, InvalidKeyType, UnknownIdentity, default_home,
)
from replica.client.identity import Ed25519Identity, Secp256k1Identity, source_of
from replica.ic.principal import principal_from_text
from replica.ic.public_keys import DER_PREFIXES, KeyScheme


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
    assert isinstance(identity.key, Ed25519Identity) and identity.key_type == "ed25519"
    assert principal == identity.principal == identity.key.principal.to_text()
    # SHA-224 of the DER public key, then 0x02 (the interface specification, *Principals*)
    assert principal_from_text(principal) == source_of(identity.key) == \
        hashlib.sha224(identity.key.der_public_key).digest() + b"\x02"
    assert identity.key.der_public_key.startswith(DER_PREFIXES[KeyScheme.ED25519])
    assert mode(store.directory / "default.pem") == 0o600 and mode(store.directory) == 0o700


def test_new_list_use_whoami(store):
    alice = store.new("alice")
    bob = store.new("bob.2")
    assert store.list() == ["alice", "bob.2"]
    assert alice.principal != bob.principal
    assert store.use("bob.2").principal == bob.principal
    assert store.whoami() == ("bob.2", bob.principal)
    assert store.load("alice").key.der_public_key == alice.key.der_public_key
    assert mode(store.directory / "alice.pem") == 0o600
    assert DEFAULT_IDENTITY not in store.list()  # nothing made a default while one is selected


def test_secp256k1_identities(store):
    bob = store.new("bob", "secp256k1")
    loaded = store.load("bob")
    assert isinstance(loaded.key, Secp256k1Identity) and loaded.key_type == "secp256k1"
    assert loaded.key.der_public_key == bob.key.der_public_key
    assert loaded.key.der_public_key.startswith(DER_PREFIXES[KeyScheme.ECDSA_SECP256K1])
    assert principal_from_text(loaded.principal) == hashlib.sha224(loaded.key.der_public_key).digest() + b"\x02"
    assert b"BEGIN PRIVATE KEY" in (store.directory / "bob.pem").read_bytes()   # PKCS#8
    assert mode(store.directory / "bob.pem") == 0o600


def test_a_secp256k1_key_in_sec1_pem_is_read(store):
    """Other IC tools write secp256k1 keys as SEC1 ``EC PRIVATE KEY``: the store reads them too."""
    key = ec.generate_private_key(ec.SECP256K1())
    store.new("placeholder")   # makes the directory
    path = store.directory / "sec1.pem"
    path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL, NoEncryption()))
    os.chmod(path, 0o600)
    assert store.load("sec1").key.der_public_key == Secp256k1Identity(key).der_public_key


@pytest.mark.parametrize("key_type", ["rsa", "ed448", "", "SECP256K1", None])
def test_unknown_key_types_are_refused_before_any_file_is_touched(store, key_type):
    with pytest.raises(InvalidKeyType):
        store.new("alice", key_type)
    assert not store.directory.exists()


def test_the_command_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    assert main(["identity", "new", "k1", "--type", "secp256k1"]) == 0
    created = capsys.readouterr().out.split()
    assert created[:4] == ["created", "identity", "k1", "(secp256k1):"]
    assert main(["identity", "use", "k1"]) == 0 and main(["identity", "whoami"]) == 0
    name, principal = capsys.readouterr().out.splitlines()[-1].split()
    assert (name, principal) == ("k1", created[-1])
    assert principal_from_text(principal) == IdentityStore().load("k1").key.principal.raw
    assert main(["identity", "new", "k1"]) == 2 and "exists already" in capsys.readouterr().err
    with pytest.raises(SystemExit):   # argparse refuses another type
        main(["identity", "new", "k2", "--type", "rsa"])


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
