"""Types of command-line values (argparse ``type=``): one-line messages that name the value."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (the message names the value)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text}")
    return value
