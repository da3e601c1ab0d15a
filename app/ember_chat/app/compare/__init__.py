"""Comparing models side by side: the dialog, its columns, and the run."""
