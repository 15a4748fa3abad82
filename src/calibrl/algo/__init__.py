"""Algorithm core: pure functions on tensors (masks, advantages, losses, rollout batches)."""
