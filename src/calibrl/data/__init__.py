"""Data: parquet in the verl/TinyZero schema, readers for public formats."""
