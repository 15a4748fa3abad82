"""The conventions every layer shares, each defined once, at the bottom of the package.

- `tags`: the format tags (`<think>`, `<answer>`, `<analysis>`, `<confidence>`);
- `completions`: laying out and cutting completions in those tags (`answer_part`, ...);
- `prompts`: the conversation texts of each turn (the RLCR instruction, the confidence question);
- `modes`: one `ModeSpec` per training mode (`two_turn`, `rlcr`, `rlvr`) and `get_mode`.

The fourth convention, what a task is, is `calibrl.tasks.Task` with its registry `get_task`: it
lives one layer up because its verifier runs under a wall-clock limit and the registry loads the
built-in tasks (see `calibrl.tasks.base`). This package imports nothing of calibrl but
`calibrl.errors`, so every other layer may import it.
"""
