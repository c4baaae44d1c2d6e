"""Generated malformed and hostile specs, and the README's promises checked on each."""
