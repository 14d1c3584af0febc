"""Command-line plumbing shared by the top-level scripts; the library itself never reads flags."""
