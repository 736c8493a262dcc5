"""Summaries, plot data, plots and the HTML report of a fitted model."""
