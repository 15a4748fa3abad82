"""Rewards: batch reward manager, calibration rewards, ecosystem adapters."""
