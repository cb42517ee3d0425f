"""The strict CBOR of the IC interface: bounded decoding of what arrives, encoding of what we send.

The interface uses a small part of CBOR (RFC 8949): unsigned and negative integers (nats above
``2**64 - 1`` as tag-2 bignums), byte strings, UTF-8 text, arrays and maps with text keys, the
whole data item optionally behind the self-describe tag 55799 (the interface specification,
*CBOR encoding of requests and responses*). ``decode`` accepts exactly that and refuses
everything else with a typed ``CborRefused``:

* more than ``max_bytes`` bytes, before parsing (``CborTooLarge``);
* containers nested deeper than ``max_depth``, while parsing (``CborTooDeep``);
* truncated items, bad UTF-8, indefinite lengths, duplicate map keys (``CborMalformed``);
* bytes after the one data item (``CborTrailingBytes``);
* floats, ``true``/``false``/``null``/``undefined`` and other simple values, every tag but a
  leading self-describe tag and bignums of at least ``2**64``, map keys that are not text
  (``CborTypeRefused``).

``encode`` writes the self-describe tag, then the value with map keys in canonical order, and
refuses (``CborTypeRefused``) any value ``decode`` would refuse, so what we send we would accept;
it is ``state_manager.cbor``'s encoder, the one the state tree's CBOR leaves are made with.
The parser is cbor2's; this module only sets its bounds and checks what it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import cbor2

from state_manager import cbor as _state_cbor
from state_manager.cbor import SELF_DESCRIBE_PREFIX, SELF_DESCRIBE_TAG, CborValueError

from .errors import CborMalformed, CborTooDeep, CborTooLarge, CborTrailingBytes, CborTypeRefused

__all__ = [
    "SELF_DESCRIBE_TAG", "SELF_DESCRIBE_PREFIX", "DEFAULT_MAX_DEPTH", "decode", "encode", "check_value",
]

#: The IC's own CBOR parser stops at 128 nested containers; nothing it sends nests deeper.
DEFAULT_MAX_DEPTH = 128

_U64_LIMIT = 1 << 64
_BIGNUM_TAG = 2


class _TagRefusal(ValueError):
    """Raised inside cbor2 for a tag the interface does not use; ``decode`` reports it."""


def _refuse_tag(tag: int):
    def refuse(*_args: object) -> NoReturn:
        raise _TagRefusal(f"CBOR tag {tag} is not used by the IC interface")
    return refuse


def _bignum(value: object, _immutable: bool = False) -> int:
    """Tag 2: an unsigned bignum. The interface uses it only for nats that do not fit major
    type 0, so a smaller one is a second encoding of the same number and is refused."""
    if not isinstance(value, bytes):
        raise _TagRefusal("a bignum's content must be a byte string")
    number = int.from_bytes(value, "big")
    if number < _U64_LIMIT:
        raise _TagRefusal(f"bignum {number} fits an unsigned integer and must be encoded as one")
    return number


class _AllowedTags(Mapping):
    """cbor2 asks this mapping for the decoder of every tag it meets (its own built-in ones
    included): bignums are decoded, every other tag is refused. The self-describe tag is
    stripped by ``decode`` before parsing, so inside the item it is refused too."""

    def __getitem__(self, tag: int):
        return _bignum if tag == _BIGNUM_TAG else _refuse_tag(tag)

    def __len__(self) -> int:
        return 0

    def __iter__(self):
        return iter(())


_TAGS = _AllowedTags()


class _Reader:
    """A seekable in-memory reader for cbor2's decoder: after one data item the decoder seeks
    back over what it read ahead, so ``position`` is where the item ends."""

    __slots__ = ("_data", "position")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else self.position + size
        chunk = self._data[self.position:end]
        self.position += len(chunk)
        return chunk

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self.position, len(self._data))[whence]
        self.position = min(max(base + offset, 0), len(self._data))
        return self.position

    def tell(self) -> int:
        return self.position


def check_value(value: Any) -> None:
    """Raise ``CborTypeRefused`` unless ``value`` is built only of ``int`` (not ``bool``; at
    least ``-2**64``, the smallest negative integer without a bignum),
    ``bytes``, ``str``, ``list``/``tuple`` and ``dict`` with ``str`` keys
    (``state_manager.cbor.check_value``)."""
    try:
        _state_cbor.check_value(value)
    except CborValueError as exc:
        raise CborTypeRefused(str(exc)) from exc


def decode(data: bytes, *, max_bytes: int, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """The one data item in ``data`` (rules and refusals in the module docstring). Integers,
    byte strings and text come back as ``int``, ``bytes`` and ``str``, arrays as ``list``,
    maps as ``dict``. ``max_depth`` counts nested arrays and maps (a flat map has depth 1)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CborTypeRefused(f"CBOR input must be bytes, not {type(data).__name__}")
    if len(data) > max_bytes:
        raise CborTooLarge(f"{len(data)} bytes of CBOR exceed the bound of {max_bytes}")
    body = bytes(data)
    if body.startswith(SELF_DESCRIBE_PREFIX):
        body = body[len(SELF_DESCRIBE_PREFIX):]
    if not body:
        raise CborMalformed("no CBOR data item")
    reader = _Reader(body)
    try:
        decoder = cbor2.CBORDecoder(
            reader, semantic_decoders=_TAGS, max_depth=max_depth, read_size=len(body),
            allow_indefinite=False, allow_duplicate_keys=False, strict_hashable_types=True)
        value = decoder.decode(immutable=False)
    except cbor2.CBORDecodeError as exc:
        raise _classify(exc, max_depth) from exc
    if reader.position != len(body):
        raise CborTrailingBytes(f"{len(body) - reader.position} bytes follow the CBOR data item")
    check_value(value)
    return value


def _classify(exc: cbor2.CBORDecodeError, max_depth: int) -> Exception:
    """The typed refusal for an error of cbor2's parser."""
    if isinstance(exc.__cause__, _TagRefusal):
        return CborTypeRefused(str(exc.__cause__))
    if isinstance(exc, cbor2.CBORDecodeEOF):
        return CborMalformed(f"truncated CBOR: {exc}")
    if "nesting depth" in str(exc):
        return CborTooDeep(f"CBOR containers nest deeper than {max_depth}")
    if "map key must be" in str(exc):
        return CborTypeRefused(f"map keys must be text: {exc}")
    return CborMalformed(f"not well-formed CBOR: {exc}")


def encode(value: Any, *, self_describe: bool = True) -> bytes:
    """``value`` as the self-describe tag (unless ``self_describe`` is false: a value embedded
    in another, like a hash tree) followed by its CBOR, map keys in canonical order;
    ``CborTypeRefused`` for a value ``decode`` would refuse. The encoder is
    ``state_manager.cbor``'s, the one the state tree's CBOR leaves are made with."""
    try:
        return _state_cbor.encode(value, self_describe=self_describe)
    except CborValueError as exc:
        raise CborTypeRefused(str(exc)) from exc
