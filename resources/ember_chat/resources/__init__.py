"""Data files shipped with Ember (the curated model catalog); loaded through engine.resources."""
