"""The CPU demo: the whole system end to end on calibrl's tiny model."""
