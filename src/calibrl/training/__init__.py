"""Training: config, trainer loop, checkpoints, logging."""
