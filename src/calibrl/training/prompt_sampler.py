"""Which prompts a step trains on: seeded epochs over the dataset, with a resumable position.

The order of epoch `e` is a permutation drawn from `(seed, e)` alone, so the state to resume is
just `(epoch, position)` — no RNG object has to be pickled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class PromptSampler:
    """Yields dataset indices in seeded, shuffled epochs (or in order when `shuffle=False`)."""

    size: int
    seed: int
    shuffle: bool = True
    rank: int = 0
    world_size: int = 1
    epoch: int = 0
    position: int = 0

    def __post_init__(self) -> None:
        if self.size < self.world_size:
            raise ValueError(f"{self.size} training prompts cannot be split over "
                             f"{self.world_size} processes")

    def _order(self, epoch: int) -> np.ndarray:
        order = np.arange(self.size)
        if self.shuffle:
            order = np.random.default_rng([self.seed, epoch]).permutation(self.size)
        # Each process takes every world_size-th prompt; the shard length is equal on every rank.
        usable = self.size - self.size % self.world_size
        return order[:usable][self.rank::self.world_size]

    def next(self, count: int) -> list[int]:
        """The next `count` indices, continuing into the next epoch as needed."""
        out: list[int] = []
        while len(out) < count:
            order = self._order(self.epoch)
            take = order[self.position : self.position + count - len(out)]
            out.extend(int(i) for i in take)
            self.position += len(take)
            if self.position >= len(order):
                self.epoch, self.position = self.epoch + 1, 0
        return out

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
