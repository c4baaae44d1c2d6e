"""spark-launch: one spec, identical vLLM commands on every node, started and proven."""

__version__ = "0.1.0"
