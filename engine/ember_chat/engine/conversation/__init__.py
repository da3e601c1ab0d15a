"""A stored conversation as the engine is given it (the window, compare, the planner and the CLI share it)."""
