"""Once it runs: start-up log stages, the watchdog, state, supervision, systemd units."""
