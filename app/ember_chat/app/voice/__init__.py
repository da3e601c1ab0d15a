"""Voice (issue 33): reading answers aloud through the system's voices."""
