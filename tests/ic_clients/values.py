"""The IC's typed values as JSON the Node scripts read back (``js/io.mjs``): a blob is
``{"$blob": hex}``, a natural number ``{"$nat": decimal}`` (JSON numbers would lose bits past
2**53), text stays text, arrays and maps stay arrays and maps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def to_json_value(value: Any) -> Any:
    if isinstance(value, bool):
        raise TypeError("the IC's maps hold no booleans")
    if isinstance(value, (bytes, bytearray)):
        return {"$blob": bytes(value).hex()}
    if isinstance(value, int):
        if value < 0:
            raise TypeError("only natural numbers travel as {$nat}")
        return {"$nat": str(value)}
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return [to_json_value(item) for item in value]
    if isinstance(value, Mapping):
        return {key: to_json_value(item) for key, item in value.items()}
    raise TypeError(f"{type(value).__name__} has no JSON form here")
