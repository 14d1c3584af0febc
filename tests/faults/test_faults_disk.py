"""A full disk while saving a checkpoint or exporting: one line naming the file, no debris.

A file size limit (`RLIMIT_FSIZE`) stands in for a full disk: past it a write fails with EFBIG
("File too large"), as it fails with ENOSPC on a full disk (Python ignores the SIGXFSZ signal).
"""

import contextlib
import os
import resource

import pytest
import tensorflow as tf

from official_bert import BertClassifier
from official_bert.common.errors import UserError
from official_bert.export.saved_model import export_classifier
from official_bert.training import checkpointing

from testing import SPECIAL_TOKENS, tiny_bert_config, write_vocab


@contextlib.contextmanager
def file_size_limit(limit):
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
  try:
    yield
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.fixture(scope="module")
def model():
  # One layer of width 64 (about 280 KB of weights) is far past the limits below.
  return BertClassifier(tiny_bert_config(7, hidden_size=64, num_hidden_layers=1), 2)


def test_a_checkpoint_that_does_not_fit_is_one_line_and_leaves_the_earlier_ones(model, tmp_path):
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(tmp_path), 3,
                                       checkpoint_name=checkpointing.CHECKPOINT_NAME)
  strategy = tf.distribute.get_strategy()
  checkpointing.save(manager, 4, strategy)
  before = sorted(os.listdir(tmp_path))
  with file_size_limit(60_000), pytest.raises(UserError) as raised:
    checkpointing.save(manager, 5, strategy)
  message = str(raised.value)
  assert "ckpt-5_temp" in message and "out of disk space (File too large)" in message
  assert "saving the checkpoint of step 5" in message and "\n" not in message
  assert sorted(os.listdir(tmp_path)) == before  # no ckpt-5_temp, ckpt-4 kept
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-4")


def test_an_export_that_does_not_fit_is_one_line_and_leaves_nothing(model, tmp_path):
  vocab = write_vocab(tmp_path / "vocab.txt", SPECIAL_TOKENS + ["a", "b"])
  with file_size_limit(60_000), pytest.raises(UserError) as raised:
    export_classifier(model, str(tmp_path / "export"), vocab_file=vocab, do_lower_case=True,
                      max_seq_length=16, jit_compile=False)
  message = str(raised.value)
  assert "out of disk space (File too large) while writing the SavedModel" in message
  assert sorted(os.listdir(tmp_path)) == ["vocab.txt"]  # no export, no export.tmp-*
