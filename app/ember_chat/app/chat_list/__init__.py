"""The chat list: the view, its model and rows, and its context menu."""
