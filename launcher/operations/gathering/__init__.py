"""Asking every node at once: its inputs and facts, the resolve probe, the collective preflight."""
