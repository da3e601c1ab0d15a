"""Tests of the window (pytest-qt, offscreen): one module per part of it."""
