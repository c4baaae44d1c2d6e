"""The spec as written: its sections, their checks, the schema, YAML with lines."""
