"""The link to the engine: its results back on the GUI thread (the bridge, background tasks) and its words
translated."""
