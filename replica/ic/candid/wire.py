"""The byte level of Candid: a bounded reader and LEB128 (the Candid specification, *Binary
Format*, *Notation*: "leb128 ... the unsigned LEB128 encoding", "sleb128 ... the signed one").

Overlong LEB128 forms are read as their value, as the specification's test suite asks ("nat:
leb overlong"). Reading a long number is linear in its length. Every failure raises
``CandidMalformed``.
"""

from __future__ import annotations

from ..errors import CandidMalformed

__all__ = ["Reader", "leb128", "sleb128"]


class Reader:
    """A position in a message; every read checks the bytes are there."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data)

    @property
    def left(self) -> int:
        return self.end - self.pos

    def byte(self) -> int:
        if self.pos >= self.end:
            raise CandidMalformed(f"the message ends at byte {self.pos}, a value is cut short")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def take(self, count: int) -> bytes:
        if count > self.end - self.pos:
            raise CandidMalformed(f"{count} bytes asked at byte {self.pos}, only {self.end - self.pos} left")
        start = self.pos
        self.pos += count
        return self.data[start:self.pos]

    def _groups(self) -> tuple[int, int]:
        """(start, end) of one LEB128 number's bytes."""
        data, pos, end = self.data, self.pos, self.end
        start = pos
        while True:
            if pos >= end:
                raise CandidMalformed(f"a LEB128 number at byte {start} is cut short")
            if data[pos] < 0x80:
                break
            pos += 1
        self.pos = pos + 1
        return start, pos + 1

    def leb(self) -> int:
        start, end = self._groups()
        return self._unsigned(start, end)

    def sleb(self) -> int:
        start, end = self._groups()
        value = self._unsigned(start, end)
        bits = 7 * (end - start)
        if self.data[end - 1] & 0x40:
            value -= 1 << bits
        return value

    def _unsigned(self, start: int, end: int) -> int:
        if end - start <= 9:
            value, shift = 0, 0
            for byte in self.data[start:end]:
                value |= (byte & 0x7F) << shift
                shift += 7
            return value
        return _long_value(self.data[start:end])


def _long_value(groups: bytes) -> int:
    # Binary digits, most significant group first: int(_, 2) is linear, a shift loop is not.
    return int("".join(format(byte & 0x7F, "07b") for byte in reversed(groups)), 2)


def leb128(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def sleb128(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40):
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)
