"""Random ``XLine`` contents for hypothesis: events with a few stats, some of
them integer stats of the ``MARKERS`` ids (the stats that mark a step)."""

from __future__ import annotations

from hypothesis import strategies as st

from traceparse._proto import xplane_pb2

MARKERS = [12, 300]  # stat ids that mark their events: one and two varint bytes

stats = st.one_of(
    st.builds(
        xplane_pb2.XStat,
        metadata_id=st.integers(0, 2**20),
        str_value=st.binary(max_size=12).map(lambda b: b.decode("latin-1")),
    ),
    st.builds(
        xplane_pb2.XStat,
        metadata_id=st.sampled_from([*MARKERS, 13, 2**20]),
        int64_value=st.integers(-(2**63), 2**63 - 1),
    ),
    st.builds(
        xplane_pb2.XStat,
        metadata_id=st.sampled_from([*MARKERS, 13]),
        uint64_value=st.integers(0, 2**64 - 1),
    ),
)
events = st.builds(
    lambda mid, data, value, duration, stats: xplane_pb2.XEvent(
        metadata_id=mid, duration_ps=duration, stats=stats, **{data: value}
    ),
    st.integers(0, 2**63 - 1),
    st.sampled_from(["offset_ps", "num_occurrences"]),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
    st.lists(stats, max_size=3),
)
