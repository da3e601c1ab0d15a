"""A panel's content as a column in its middle: centred across, a third of the spare height above it."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLayout, QSizePolicy, QVBoxLayout, QWidget

COLUMN_WIDTH = 520  # px at most: lines stay short enough to read on a wide window


def centre_column(panel: QWidget, column: QLayout, width: int = COLUMN_WIDTH) -> None:
    """Lay `column` out in the middle of `panel` (which has no layout yet), at most `width` px wide
    (narrower on a small screen: its labels wrap). Centred by stretches, not an alignment flag, so
    wrapped labels get the height they need."""
    holder = QWidget()
    holder.setLayout(column)
    holder.setMaximumWidth(width)
    holder.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
    row = QHBoxLayout()
    row.addStretch(1)
    row.addWidget(holder)
    row.addStretch(1)
    outer = QVBoxLayout(panel)
    outer.addStretch(1)
    outer.addLayout(row)
    outer.addStretch(2)
