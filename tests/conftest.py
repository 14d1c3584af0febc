"""The test session's set-up: TensorFlow's log level and the tools' oneDNN switch, before
TensorFlow loads. Shared helpers live in `testing.py`, not here."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import official_bert.cli  # noqa: F401,E402  (turns oneDNN on before TensorFlow loads)
