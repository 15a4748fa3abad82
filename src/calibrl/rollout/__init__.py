"""Rollout: generation engines and the single/two-turn rollouts."""
