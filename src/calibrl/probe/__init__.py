"""Faithfulness probe: confidence along a chain of thought."""
