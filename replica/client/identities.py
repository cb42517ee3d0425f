"""The identity store: a user's named keys, as PEM files only the user may read (shell).

Layout under ``home`` (``$REPLICA_HOME``, default ``~/.config/replica``)::

    identities/              mode 0700
      <name>.pem             PKCS#8 PEM, unencrypted, mode 0600: an Ed25519 or secp256k1 key
      selected               the name ``use`` chose (absent: ``default``)

``new(name, key_type)`` creates a key, Ed25519 unless ``key_type`` is ``secp256k1`` (refusing a
bad or existing name), ``list()`` names them, ``use(name)`` selects one, ``whoami()`` is the
selected one's name and principal, ``load(name)`` reads a key. The ``default`` identity is
created on first use when nothing else is selected. A key is an IC identity
(``replica.client.identity``); its principal, the caller canisters see, is
``SHA-224(DER public key) · 0x02``, shown in the IC's textual form (``xxxxx-xxxxx-…``). A key file
readable or writable by group or others, or not an Ed25519 or secp256k1 private key, is refused
(a secp256k1 key in SEC1 PEM, as other IC tools write it, is read too).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, load_pem_private_key

from replica.errors import ReplicaError
from replica.ic.errors import SigningKeyError
from state_manager.durable_files import write_atomically, write_new_file

from .identity import DEFAULT_KEY_TYPE, KEY_TYPES, UserIdentity, identity_of_private_key, key_type_of

__all__ = [
    "DEFAULT_IDENTITY", "HOME_ENV", "IdentityError", "InvalidIdentityName", "InvalidKeyType", "IdentityExists",
    "UnknownIdentity", "IdentityFileTooOpen", "IdentityUnreadable", "NamedIdentity", "IdentityStore", "default_home",
]

DEFAULT_IDENTITY = "default"
HOME_ENV = "REPLICA_HOME"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_MAX_KEY_FILE_BYTES = 4096


class IdentityError(ReplicaError):
    """Root of the identity store's errors."""


class InvalidIdentityName(IdentityError):
    pass


class InvalidKeyType(IdentityError):
    """A key type other than ``ed25519`` and ``secp256k1``."""


class IdentityExists(IdentityError):
    pass


class UnknownIdentity(IdentityError):
    pass


class IdentityFileTooOpen(IdentityError):
    """A key file that group or others may read or write."""


class IdentityUnreadable(IdentityError):
    """A key file that cannot be read, or is not an Ed25519 or secp256k1 private key in PEM."""


@dataclass(frozen=True)
class NamedIdentity:
    name: str
    key: UserIdentity

    @property
    def key_type(self) -> str:
        return key_type_of(self.key)

    @property
    def principal(self) -> str:
        """The key's principal in the IC's textual form: the caller id canisters see."""
        return self.key.principal.to_text()


def _generate(key_type: str) -> Ed25519PrivateKey | ec.EllipticCurvePrivateKey:
    if key_type not in KEY_TYPES:
        raise InvalidKeyType(f"key type {key_type!r} is not one of {', '.join(KEY_TYPES)}")
    return Ed25519PrivateKey.generate() if key_type == "ed25519" else ec.generate_private_key(ec.SECP256K1())


def default_home() -> Path:
    """``$REPLICA_HOME``, else ``~/.config/replica``."""
    value = os.environ.get(HOME_ENV)
    return Path(value) if value else Path.home() / ".config" / "replica"


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.endswith(".pem") or name == "selected":
        raise InvalidIdentityName(
            f"identity name {name!r} must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    return name


class IdentityStore:
    """The identities of one user (module docstring)."""

    def __init__(self, home: Path | str | None = None) -> None:
        self.home = Path(home) if home is not None else default_home()
        self.directory = self.home / "identities"

    def _path(self, name: str) -> Path:
        return self.directory / f"{_check_name(name)}.pem"

    def _ensure_directory(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)

    def new(self, name: str, key_type: str = DEFAULT_KEY_TYPE) -> NamedIdentity:
        """Create identity ``name`` with a fresh key of ``key_type`` (``IdentityExists`` if it exists)."""
        path = self._path(name)
        key = _generate(key_type)
        self._ensure_directory()
        pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
        try:   # never overwrites a key
            write_new_file(path, pem, tmp=path.with_name(f".{name}.{os.getpid()}.tmp"), mode=0o600)
        except FileExistsError:
            raise IdentityExists(f"identity {name!r} exists already ({path})") from None
        return NamedIdentity(name, identity_of_private_key(key))

    def list(self) -> list[str]:
        """The names of the stored identities, sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.pem") if _NAME.fullmatch(p.stem))

    def load(self, name: str) -> NamedIdentity:
        """Read identity ``name``; refuse a missing, too open or malformed key file."""
        path = self._path(name)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            raise UnknownIdentity(f"no identity {name!r} (known: {', '.join(self.list()) or 'none'})") from None
        except OSError as exc:
            raise IdentityUnreadable(f"cannot read {path}: {exc.strerror}") from exc
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise IdentityUnreadable(f"{path} is not a regular file")
            if mode & 0o077:
                raise IdentityFileTooOpen(
                    f"{path} has mode {stat.S_IMODE(mode):04o}: group and others may access it (chmod 600 it)")
            data = os.read(fd, _MAX_KEY_FILE_BYTES + 1)
        except OSError as exc:
            raise IdentityUnreadable(f"cannot read {path}: {exc.strerror}") from exc
        finally:
            os.close(fd)
        if len(data) > _MAX_KEY_FILE_BYTES:
            raise IdentityUnreadable(f"{path} is too large to be a key file")
        try:
            key = load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise IdentityUnreadable(f"{path} is not an unencrypted PEM private key: {exc}") from exc
        try:
            return NamedIdentity(name, identity_of_private_key(key))
        except SigningKeyError as exc:
            raise IdentityUnreadable(f"{path} holds {exc}") from exc

    def use(self, name: str) -> NamedIdentity:
        """Select identity ``name`` (it must exist) for later ``current()`` / ``whoami()``."""
        identity = self.load(name)
        self._ensure_directory()
        selected = self.directory / "selected"
        write_atomically(selected, (name + "\n").encode(), tmp=self.directory / f".selected.{os.getpid()}.tmp")
        return identity

    def selected_name(self) -> str:
        """The selected identity's name (``default`` if none was selected)."""
        try:
            name = (self.directory / "selected").read_text().strip()
        except FileNotFoundError:
            return DEFAULT_IDENTITY
        except OSError as exc:
            raise IdentityUnreadable(f"cannot read the selected identity: {exc.strerror}") from exc
        return _check_name(name)

    def current(self) -> NamedIdentity:
        """The selected identity; ``default`` is created on first use."""
        name = self.selected_name()
        if name == DEFAULT_IDENTITY and not self._path(name).exists():
            try:
                return self.new(DEFAULT_IDENTITY)
            except IdentityExists:
                pass  # created meanwhile by another process
        return self.load(name)

    def whoami(self) -> tuple[str, str]:
        """``(name, principal text)`` of the current identity."""
        identity = self.current()
        return identity.name, identity.principal
