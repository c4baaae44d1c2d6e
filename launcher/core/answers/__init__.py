"""What the node scripts answer, typed: each answer parsed and checked strictly. Pure.

A node is not trusted. `read.At` reads a JSON answer value by value (types, lengths,
characters, ranges); each module here turns one family of scripts' answers into frozen
dataclasses or TypedDicts. What does not parse is a `BadAnswer` saying where and what; an
answer that says its job failed is `Refused`. The Agent (launcher/node/agent.py) turns
both into a NodeError naming the node, so the commands only ever see well-formed values.
"""
