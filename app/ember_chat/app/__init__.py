"""Ember's desktop GUI (PySide6 Widgets): the only package that imports Qt."""
