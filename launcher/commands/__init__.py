"""The verbs, one module each (check, up, down, status, logs, verify, sync_models, ...): each takes
the chosen deployments (or hosts), returns a result and reports progress to a Reporter; none
prints or exits, and none imports another verb: what verbs share is in launcher.operations."""
