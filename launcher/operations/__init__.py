"""What the verbs share, in rooms named for what they hold; below the verbs, above node/.

    gathering/  asking every node at once: its inputs and facts, the probe, the collective
                preflight, a listener, what a plan needs from the head
    running/    a cluster's ranks: starting, following, watching, stopping, supervising one
                cluster, its status, the head's health, the endpoint, the page cache
    copying/    the copies `sync` makes: model files, container images, through a relay
    fleet       the chosen deployments of a spec, and doing one thing for each at once
    gate        `check`'s comparison of one cluster's nodes, and of several deployments
    drift       the lock file held against what the nodes hold now (`up --locked`)
    evidence, receipt_store, reporter: a failure's evidence, the runs' receipts, progress

Nothing here prints or exits, and nothing imports a verb (launcher.commands) or the command line.
"""
