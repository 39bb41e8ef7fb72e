"""Draft-vocabulary coverage: how much of the target's own output the drafter's vocabulary can draft."""
