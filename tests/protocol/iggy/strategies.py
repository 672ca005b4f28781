"""Hypothesis strategies for protocol values, shared by the property tests."""

from __future__ import annotations

from hypothesis import strategies as st

from rill.protocol.iggy.headers import HeaderKind, HeaderValue
from rill.protocol.iggy.messages import Message
from rill.protocol.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)
from rill.protocol.iggy.primitives import (
    Consumer,
    ConsumerKind,
    Identifier,
    Partitioning,
    PartitioningKind,
    PollingKind,
    PollingStrategy,
)

U32 = st.integers(0, 0xFFFF_FFFF)
U64 = st.integers(0, 0xFFFF_FFFF_FFFF_FFFF)
U128 = st.integers(0, (1 << 128) - 1)


def _fits(max_bytes: int, min_bytes: int = 1):
    return lambda text: min_bytes <= len(text.encode("utf-8")) <= max_bytes


names = st.text(min_size=1, max_size=60).filter(_fits(255))
short_strings = st.text(max_size=40).filter(_fits(255, 0))

identifiers = st.one_of(
    U32.map(Identifier),
    st.text(min_size=1, max_size=255).filter(_fits(255)).map(Identifier),
)
consumers = st.builds(Consumer, st.sampled_from(ConsumerKind), identifiers)
partitionings = st.builds(
    Partitioning, st.sampled_from(PartitioningKind), st.binary(max_size=255)
)
polling_strategies = st.builds(PollingStrategy, st.sampled_from(PollingKind), U64)


@st.composite
def header_values(draw) -> HeaderValue:
    kind = draw(st.sampled_from(HeaderKind))
    if kind == HeaderKind.RAW:
        return HeaderValue.raw(draw(st.binary(min_size=1, max_size=255)))
    if kind == HeaderKind.STRING:
        return HeaderValue.string(draw(st.text(min_size=1, max_size=60).filter(_fits(255))))
    if kind == HeaderKind.BOOL:
        return HeaderValue.bool(draw(st.booleans()))
    if kind in (HeaderKind.FLOAT32, HeaderKind.FLOAT64):
        width = 32 if kind == HeaderKind.FLOAT32 else 64
        return HeaderValue.float(kind, draw(st.floats(width=width, allow_nan=False)))
    size = {4: 1, 5: 2, 6: 4, 7: 8, 8: 16, 9: 1, 10: 2, 11: 4, 12: 8, 13: 16}[int(kind)]
    signed = kind <= HeaderKind.INT128
    low, high = (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if signed else (0, (1 << (8 * size)) - 1)
    return HeaderValue.int(kind, draw(st.integers(low, high)))


header_maps = st.dictionaries(
    st.text(min_size=1, max_size=30).filter(_fits(255)), header_values(), max_size=5
)

flags = st.booleans()
topic_permissions = st.builds(TopicPermissions, flags, flags, flags, flags)
stream_permissions = st.builds(
    StreamPermissions, flags, flags, flags, flags, flags, flags,
    st.one_of(st.none(), st.dictionaries(U32, topic_permissions, max_size=4)),
)
global_permissions = st.builds(GlobalPermissions, *([flags] * 10))
permissions = st.builds(
    Permissions,
    global_permissions,
    st.one_of(st.none(), st.dictionaries(U32, stream_permissions, max_size=4)),
)

messages = st.builds(
    Message,
    payload=st.binary(min_size=1, max_size=200),
    id=U128,
    headers=st.one_of(st.none(), header_maps),
)
