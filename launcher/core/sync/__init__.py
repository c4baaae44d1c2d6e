"""Model manifests, what a copy must move, and the sync reports."""
