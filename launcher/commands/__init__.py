"""One module per user-facing operation (check, up, down, status, logs, verify, ...): each takes a
Cluster, returns a result and reports progress to a Reporter; none prints or exits."""
