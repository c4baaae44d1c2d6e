"""Reaching the nodes: one Executor interface (SSH, or this machine in tests), the agent that
sends the node scripts, and the Cluster handle every operation shares. Never imports commands."""
