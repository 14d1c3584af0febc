"""Tests for official_bert.checkpoints.tf1: the original TF1 BERT checkpoint format in and out."""

import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertConfig, BertEncoder, BertPretrainer
from official_bert.checkpoints import tf1
from official_bert.common.errors import UserError

from testing import original_variables, shared_data, tiny_bert_config

CONFIG = tiny_bert_config(20, hidden_size=8, max_position_embeddings=16)


def write_original_checkpoint(prefix, variables, step=7):
  """Writes `variables` the way the original TF1 code did: graph variables, Adam slots, a Saver."""
  with tf.Graph().as_default():
    for name, value in variables.items():
      tf.compat.v1.get_variable(name, initializer=tf.constant(value))
      for slot in ("adam_m", "adam_v"):
        tf.compat.v1.get_variable(f"{name}/{slot}", initializer=tf.zeros_like(value))
    tf.compat.v1.get_variable("global_step", initializer=tf.constant(step, tf.int64))
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      tf.compat.v1.train.Saver().save(session, str(prefix), write_meta_graph=False)
  return str(prefix)


@pytest.fixture(name="checkpoint", scope="module")
def fixture_checkpoint(tmp_path_factory):
  variables = original_variables(CONFIG)
  prefix = tmp_path_factory.mktemp("original") / "bert_model.ckpt"
  return write_original_checkpoint(prefix, variables), variables


@pytest.fixture(name="loaded", scope="module")
def fixture_loaded(checkpoint):
  """A pre-trainer loaded from `checkpoint`; the tests only read it."""
  model = BertPretrainer(CONFIG)
  tf1.load_tf1_checkpoint(model, checkpoint[0])
  return model


@pytest.fixture(name="headless", scope="module")
def fixture_headless(tmp_path_factory):
  """An encoder-only original checkpoint, `model.ckpt-7` with its checkpoint state file."""
  values = original_variables(CONFIG, heads=False)
  folder = tmp_path_factory.mktemp("headless")
  return write_original_checkpoint(folder / "model.ckpt-7", values), values


def assert_bit_equal(actual, expected, name):
  assert actual.dtype == expected.dtype and actual.shape == expected.shape, name
  assert np.array_equal(actual.view(np.uint32), expected.view(np.uint32)), name


def test_loads_every_variable_into_the_right_place(checkpoint, loaded):
  _, values = checkpoint
  model = loaded
  encoder, layer = model.encoder, model.encoder.transformer_layers[1]
  np.testing.assert_array_equal(encoder.embeddings.word_embeddings.embeddings.numpy(),
                                values["bert/embeddings/word_embeddings"])
  np.testing.assert_array_equal(encoder.embeddings.layer_norm.gamma.numpy(),
                                values["bert/embeddings/LayerNorm/gamma"])
  fused = np.concatenate([values[f"bert/encoder/layer_1/attention/self/{part}/kernel"]
                          for part in ("query", "key", "value")], axis=1)
  np.testing.assert_array_equal(layer.attention.qkv.kernel.numpy(), fused)
  np.testing.assert_array_equal(layer.attention.qkv.bias.numpy()[8:16],
                                values["bert/encoder/layer_1/attention/self/key/bias"])
  # The feed-forward output kernel is kept transposed (`TransposedDense`).
  np.testing.assert_array_equal(layer.output_dense.kernel.numpy(),
                                values["bert/encoder/layer_1/output/dense/kernel"].T)
  np.testing.assert_array_equal(layer.output_layer_norm.beta.numpy(),
                                values["bert/encoder/layer_1/output/LayerNorm/beta"])
  np.testing.assert_array_equal(encoder.pooler.kernel.numpy(), values["bert/pooler/dense/kernel"])
  np.testing.assert_array_equal(model.masked_lm.output_bias.numpy(),
                                values["cls/predictions/output_bias"])
  np.testing.assert_array_equal(model.masked_lm.layer_norm.gamma.numpy(),
                                values["cls/predictions/transform/LayerNorm/gamma"])
  np.testing.assert_array_equal(model.next_sentence.dense.kernel.numpy(),
                                values["cls/seq_relationship/output_weights"].T)


def test_write_back_is_bit_exact_with_original_names(checkpoint, loaded, tmp_path):
  _, values = checkpoint
  written = tf1.save_tf1_checkpoint(loaded, tmp_path / "out" / "bert_model.ckpt")
  reader = tf.train.load_checkpoint(written)
  assert reader.get_variable_to_shape_map() == {name: list(value.shape)
                                                for name, value in values.items()}
  for name, value in values.items():
    assert_bit_equal(reader.get_tensor(name), value, name)
  assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
      "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]


def test_shared_tiny_random_checkpoint_round_trip(tmp_path):
  folder = shared_data("checkpoints/tf1_tiny_random")
  config = BertConfig.from_json_file(folder / "bert_config.json")
  model = BertPretrainer(config)
  tf1.load_tf1_checkpoint(model, folder)
  written = tf1.save_tf1_checkpoint(model, tmp_path / "bert_model.ckpt")
  source = tf.train.load_checkpoint(str(folder / "bert_model.ckpt"))
  originals = [name for name in source.get_variable_to_shape_map() if not tf1.is_bookkeeping(name)]
  assert len(originals) == 46 and "global_step" in source.get_variable_to_shape_map()
  copy = tf.train.load_checkpoint(written)
  assert sorted(copy.get_variable_to_shape_map()) == sorted(originals)
  dtypes = copy.get_variable_to_dtype_map()
  for name in originals:
    assert dtypes[name] == source.get_variable_to_dtype_map()[name]
    assert_bit_equal(copy.get_tensor(name), source.get_tensor(name), name)


def test_names_and_shapes_match_google_bert_mini_one_to_one():
  folder = shared_data("checkpoints/google_bert_mini_index_only")
  listed = dict(tf1.list_tf1_variables(folder))
  assert len(listed) == 78
  model = BertPretrainer(BertConfig.from_json_file(folder / "bert_config.json"))
  assert tf1.original_variable_shapes(model) == listed
  assert tf1.check_compatible(model, listed, source=str(folder)) == []


def test_encoder_ignores_heads_and_optimizer_slots(checkpoint):
  prefix, values = checkpoint
  encoder = BertEncoder(CONFIG)
  tf1.load_tf1_checkpoint(encoder, prefix)
  weights = tf1.get_original_weights(encoder)
  assert sorted(weights) == sorted(name for name in values if name.startswith("bert/"))
  for name, value in weights.items():
    np.testing.assert_array_equal(value, values[name])


def test_reports_missing_unexpected_and_mismatched_variables(tmp_path):
  values = original_variables(CONFIG)
  del values["bert/encoder/layer_1/output/dense/bias"]
  values["bert/encoder/layer_2/output/dense/bias"] = np.zeros(8, np.float32)
  values["bert/embeddings/word_embeddings"] = np.zeros((21, 8), np.float32)
  prefix = write_original_checkpoint(tmp_path / "bert_model.ckpt", values)
  with pytest.raises(ValueError) as error:
    tf1.load_tf1_checkpoint(BertPretrainer(CONFIG), prefix)
  message = str(error.value)
  assert prefix in message
  assert "missing (1): bert/encoder/layer_1/output/dense/bias" in message
  assert "unexpected (1): bert/encoder/layer_2/output/dense/bias" in message
  assert "bert/embeddings/word_embeddings: checkpoint [21, 8] vs model [20, 8]" in message
  assert "adam" not in message and "global_step" not in message


def test_pretrainer_needs_the_heads(headless):
  prefix, _ = headless
  with pytest.raises(ValueError, match=r"missing \(7\): cls/predictions/output_bias"):
    tf1.load_tf1_checkpoint(BertPretrainer(CONFIG), prefix)


def test_resolves_folders_with_a_checkpoint_state_file(headless):
  prefix, values = headless
  folder = pathlib.Path(prefix).parent
  assert tf1.resolve_tf1_prefix(folder) == str(folder / "model.ckpt-7")
  assert tf1.resolve_tf1_prefix(folder / "nothing") is None
  with pytest.raises(FileNotFoundError, match="No TF1 checkpoint at"):
    tf1.read_tf1_checkpoint(folder / "nothing")
  assert sorted(tf1.read_tf1_checkpoint(folder)) == sorted(values)


def test_rewriting_a_prefix_replaces_the_old_checkpoint(tmp_path):
  prefix = tmp_path / "bert_model.ckpt"
  first = BertEncoder(CONFIG)
  tf1.save_tf1_checkpoint(first, prefix)
  (tmp_path / "bert_model.ckpt.data-00000-of-00002").write_bytes(b"stale shard")
  second = BertPretrainer(CONFIG)
  tf1.save_tf1_checkpoint(second, prefix)
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index"]
  assert tf1.has_pretraining_heads(tf1.list_tf1_variables(prefix))


@pytest.mark.parametrize("hidden_act, formats, written", [
    ("gelu_tanh", ("tf1",), "gelu"), ("gelu_tanh", ("keras", "tf1"), "gelu"),
    ("gelu_tanh", ("keras",), "gelu_tanh"), ("gelu_erf", ("keras",), "gelu_erf"),
    ("gelu_erf", ("keras", "tf1"), "gelu_erf")])
def test_exported_folders_name_the_gelu_so_that_reading_them_back_keeps_it(
    tmp_path, hidden_act, formats, written):
  import dataclasses
  import json

  from official_bert import checkpoints

  config = dataclasses.replace(CONFIG, hidden_act=hidden_act)
  folder = checkpoints.write_dir(BertEncoder(config), tmp_path / "out", formats=formats)
  # The original code reads `gelu` as its tanh form; `gelu_erf` has no name there.
  assert json.loads((tmp_path / "out" / "bert_config.json").read_text())["hidden_act"] == written
  assert checkpoints.read_config(folder).hidden_act == hidden_act
  assert checkpoints.load_encoder(folder).transformer_layers[1].activation == hidden_act


def test_an_erf_gelu_written_for_the_original_code_is_warned_about(tmp_path, caplog):
  import dataclasses

  from official_bert import checkpoints

  checkpoints.write_dir(BertEncoder(dataclasses.replace(CONFIG, hidden_act="gelu_erf")),
                        tmp_path / "out", formats=("tf1",))
  assert "hidden_act 'gelu_erf' has no name in the original" in caplog.text


def test_a_missing_or_truncated_data_shard_is_one_line_naming_the_checkpoint(checkpoint, tmp_path):
  source, _ = checkpoint
  for damage in ("missing", "truncated"):
    folder = tmp_path / damage
    folder.mkdir()
    for path in tf.io.gfile.glob(f"{source}.*"):
      tf.io.gfile.copy(path, str(folder / os.path.basename(path)))
    (shard,) = folder.glob("bert_model.ckpt.data-*")
    if damage == "missing":
      shard.unlink()
      message = r"bert_model.ckpt.index has no data shard beside it"
    else:
      shard.write_bytes(shard.read_bytes()[:100])
      message = r"bert_model.ckpt: the checkpoint's data cannot be read"
    with pytest.raises(UserError, match=message):
      tf1.read_tf1_checkpoint(str(folder))
