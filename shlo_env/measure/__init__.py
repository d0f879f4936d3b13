"""Measurement: timing policy, the paired test, noise thresholds, numerics, verification, profile, roofline, results database."""
