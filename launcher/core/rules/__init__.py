"""Derived settings: the machinery (`base`), the deciders by topic, and the table (`table`)."""

from launcher.core.rules.base import Decision, Inputs, Rule, RuleProblem, Unresolved, in_range
from launcher.core.rules.table import RULES

__all__ = ["RULES", "Decision", "Inputs", "Rule", "RuleProblem", "Unresolved", "in_range"]
