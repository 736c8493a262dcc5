"""Fold schemes: which fold and class each row belongs to, and ``cv=`` splits."""
