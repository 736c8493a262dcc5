"""The scikit-learn estimators and the core they share."""
