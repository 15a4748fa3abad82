"""The conventions every layer shares, at the bottom of the package (imports nothing of calibrl)."""
