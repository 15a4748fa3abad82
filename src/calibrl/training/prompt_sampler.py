"""Which prompts a step trains on: seeded epochs over the dataset, with a resumable position.

The order of epoch `e` is a permutation drawn from `(seed, e)` alone, so the state to resume is
just `(epoch, position)` — no RNG object has to be pickled. The sampler is global: with several
processes each draws the same indices and rolls out its share of them
(`calibrl.training.distributed.shard_bounds`), so the prompts of a step do not depend on the
number of processes.
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
    epoch: int = 0
    position: int = 0

    def _order(self, epoch: int) -> np.ndarray:
        if self.shuffle:
            return np.random.default_rng([self.seed, epoch]).permutation(self.size)
        return np.arange(self.size)

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
