"""The stats of a batch of events as tables: a row per stat the decoder reads,
a column per event. Both readers (the compiled one and the numpy one) fill
them; ``fields.DecodedEvents`` turns them into typed values."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class StatTables:
    """Per cell (stat row, event), the last stat with a value: its kind (the
    ``XStat`` field number of the value, 0 where the event has none), its value
    bits (varint or fixed64), and where its payload lies (text values)."""

    kinds: np.ndarray  # int8
    values: np.ndarray  # uint64
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64

    @classmethod
    def zeros(cls, rows: int, events: int) -> StatTables:
        shape = (rows, events)
        return cls(
            np.zeros(shape, np.int8),
            np.zeros(shape, np.uint64),
            np.zeros(shape, np.int64),
            np.zeros(shape, np.int64),
        )

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.kinds, self.values, self.starts, self.lengths

    def fill(
        self,
        cells: np.ndarray,
        kinds: np.ndarray,
        values: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
    ) -> None:
        """Write stats into their cells (row * events + event), in wire order: where
        an event repeats a stat, the last one wins."""
        for table, column in zip(self.arrays(), (kinds, values, starts, lengths), strict=True):
            table.reshape(-1)[cells] = column
