"""Evaluation: metrics (pure functions) and, later, benchmark runners."""
