"""Data for fine-tuning: the task readers and features (GLUE, custom, TFDS, SQuAD, SWAG, CoNLL) and
the generated demo corpus. Pre-training data lives in `official_bert.pretraining`."""
