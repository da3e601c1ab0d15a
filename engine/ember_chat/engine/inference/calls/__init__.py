"""Tool calls in a model's answer: each family's format, reading calls as the answer streams, the grammar that
holds a call to its schema, the preview of a call being written, one answer's calls."""
