"""Budgets: how many tokens, how much cost or how many runs a person, a group or an agent may
use per day, week or month, checked before each run's model call (see `gate`)."""
