"""The side panel: parameters, presets' picker, the metrics of an answer (its chart, the context meter, a JSON
answer's check)."""
