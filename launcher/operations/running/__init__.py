"""A cluster's ranks: started, followed, watched, stopped, supervised, and how it serves."""
