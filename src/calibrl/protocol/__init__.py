"""The conventions every layer shares, each defined once, at the bottom of the package.

- `tags`: the format tags (`<think>`, `<answer>`, `<analysis>`, `<confidence>`);
- `prompts`: the conversation texts of each turn (the RLCR instruction, the confidence question);
- `modes`: one `ModeSpec` per training mode (`two_turn`, `rlcr`, `rlvr`) and `get_mode`.

This package imports nothing of calibrl but `calibrl.errors`, so every other layer may import it.
"""
