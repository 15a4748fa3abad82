"""calibrl: RL for language models that are right and know when they are right."""

__version__ = "0.1.0"
