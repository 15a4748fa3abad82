"""What "the same samples" means when two decoding paths are compared (fast vs ordinary forward).

Token ids, finish reasons and texts must be equal: they are what a user sees and what the
verifier scores. Log-probs are compared within `LOGPROB_ATOL`, not bit for bit: the two paths run
the same layers but not always at the same batch shapes (the fast path keeps finished rows in a
static batch, the ordinary one compacts it), and a BLAS kernel run with more than one thread may
split a reduction differently at another shape. On the AMD EPYC kind with 2 threads one log-prob
moved in the 7th digit (-0.8322882 vs -0.8322875); with 1 thread the two were bit-equal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

# Float32 log-probs of a few-thousand-token vocabulary: rounding differences are ~1e-7 relative;
# 1e-5 is two orders above them and far below any difference a real change would make.
LOGPROB_ATOL = 1e-5


def flatten(results: Iterable[Sequence]) -> list:
    """The generations of nested per-prompt lists, in order."""
    return [g for gens in results for g in gens]


def assert_same_samples(fast: Sequence, slow: Sequence, *, with_text: bool = True) -> None:
    """`fast` and `slow` (flat lists of `Generation`) hold the same tokens, finish reasons and
    texts, and log-probs within `LOGPROB_ATOL`."""
    assert len(fast) == len(slow)
    for i, (a, b) in enumerate(zip(fast, slow, strict=True)):
        assert a.token_ids == b.token_ids, f"sample {i}: tokens differ"
        assert a.finish_reason == b.finish_reason, f"sample {i}: finish reason differs"
        if with_text:
            assert a.text == b.text, f"sample {i}: text differs"
        assert len(a.logprobs) == len(b.logprobs)
        for x, y in zip(a.logprobs, b.logprobs, strict=True):
            assert math.isclose(x, y, rel_tol=0.0, abs_tol=LOGPROB_ATOL), (
                f"sample {i}: log-prob {x} vs {y}")
