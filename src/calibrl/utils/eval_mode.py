"""Switching a model to eval mode for sampling, and back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def eval_mode(model: Any) -> Iterator[None]:
    """Sample without dropout, then give the model back in the mode the trainer left it."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
