"""Tests of `official_bert.checkpoints`; a package, as tests/faults imports its writers of
foreign checkpoints (Hugging Face, TF1)."""
