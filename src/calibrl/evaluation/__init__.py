"""Evaluation: accuracy and calibration metrics, reports and figures."""
