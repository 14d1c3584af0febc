"""The command-line tools: absl flags in, one library call out.

Each module here is one tool (`run_classifier`, `run_squad`, `create_pretraining_data`, ...),
installed as a `bert-*` command (`pyproject.toml`) and called by the top-level script of the
original's name. Its `define_flags()` defines its flags and its `run()` entry point calls that, then
parses the command line; importing a tool defines nothing, so tools and tests share a process. Only
this package reads flags; the library takes arguments.

Importing this package is the one place that sets the process environment: it turns TensorFlow's
oneDNN CPU kernels on unless `TF_ENABLE_ONEDNN_OPTS` is already set. TensorFlow leaves them off on
some CPUs, where matrix products then run at half speed, and reads the switch once, when it is
first imported; `official_bert` imports TensorFlow lazily, so this runs first.
"""

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
