"""Certified stream slices (docs/architecture.md, *Certified stream slices*): stream data of
``/streams/<dst>``, a witness that proves it under the certified root, and the certification
of that root.

One module per job; this package re-exports their public names:

* ``layout``        — the wire format, bounds and labels, ``CertifiedSlice``, ``message_label``;
* ``witness_plan``  — which positions of the certified tree a slice's witness reveals;
* ``encode``        — ``encode_certified_stream_slice`` (the XNet endpoint's side);
* ``bounded_parse`` — parsing payload and witness within ``witness_budget``, refusing the
  first node too many while parsing;
* ``decode``        — ``decode_certified_stream_slice`` (the total decoder, checks in the
  order its docstring lists) and ``decode_valid_certified_stream_slice``;
* ``edit``          — ``restrict_certified_slice`` and ``append_certified_slice`` (slice pool);
* ``errors``        — one class per failure under ``CertifiedSliceError``.

Pure: the certified tree, the certification and the public key lookup arrive as arguments.
"""

from __future__ import annotations

from . import errors
from .bounded_parse import witness_budget
from .decode import certified_slice_byte_size, decode_certified_stream_slice, decode_valid_certified_stream_slice
from .edit import append_certified_slice, restrict_certified_slice
from .encode import encode_certified_stream_slice
from .errors import *  # noqa: F403 - every error class, as errors.__all__ lists them
from .layout import (
    SLICE_VERSION,
    DEFAULT_MAX_SLICE_BYTES,
    DEFAULT_MAX_TREE_DEPTH,
    DEFAULT_MAX_EXTRA_POSITIONS,
    STREAMS_LABEL,
    HEADER_LABEL,
    MESSAGES_LABEL,
    METADATA_LABEL,
    HEIGHT_LABEL,
    CertifiedSlice,
    message_label,
    height_leaf,
)

__all__ = [
    "SLICE_VERSION",
    "DEFAULT_MAX_SLICE_BYTES",
    "DEFAULT_MAX_TREE_DEPTH",
    "DEFAULT_MAX_EXTRA_POSITIONS",
    "STREAMS_LABEL",
    "HEADER_LABEL",
    "MESSAGES_LABEL",
    "METADATA_LABEL",
    "HEIGHT_LABEL",
    *errors.__all__,
    # API
    "CertifiedSlice",
    "message_label",
    "height_leaf",
    "witness_budget",
    "encode_certified_stream_slice",
    "decode_certified_stream_slice",
    "decode_valid_certified_stream_slice",
    "certified_slice_byte_size",
    "restrict_certified_slice",
    "append_certified_slice",
]
