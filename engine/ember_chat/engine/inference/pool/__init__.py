"""Models served by name and loaded on demand, within a memory budget (pool.py, memory.py)."""
