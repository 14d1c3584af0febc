"""Tests for the converter: model folders from checkpoints, the loaders, `convert_checkpoint`."""

import math
import sys

from absl import flags
import numpy as np
import pytest
from safetensors.numpy import load_file
import tensorflow as tf

from official_bert import BertClassifier, BertConfig, BertEncoder, BertPretrainer, checkpoints
from official_bert.checkpoints import tf1
from official_bert.cli import convert_checkpoint

from testing import (
  assert_no_scheme_folders,
  file_uri,
  minilm_model_dir,
  run_python,
  tiny_bert_config,
)

CONFIG = tiny_bert_config(12, hidden_size=8, max_position_embeddings=16)
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "."]


def run_script(*args):
  flag_values = flags.FlagValues()
  convert_checkpoint.define_flags(flag_values)
  flag_values(["convert_checkpoint", *args])
  return convert_checkpoint.convert_from_flags(flag_values)


@pytest.fixture(name="source", scope="module")
def fixture_source(tmp_path_factory):
  """A random pre-trainer written as an original TF1 folder (checkpoint, config, vocab)."""
  folder = tmp_path_factory.mktemp("tf1_source")
  model = BertPretrainer(CONFIG)
  for variable in model.weights:
    variable.assign(np.random.default_rng(len(variable.path)).standard_normal(variable.shape))
  tf1.save_tf1_checkpoint(model, folder / "bert_model.ckpt")
  CONFIG.to_json_file(folder / "bert_config.json")
  (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  return folder, model


def assert_same_weights(actual, expected):
  assert len(actual.weights) == len(expected.weights)
  for a, b in zip(actual.weights, expected.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_tf1_to_keras_folder_and_back(source, tmp_path):
  folder, model = source
  output = run_script("--input_format=tf1", f"--input={folder / 'bert_model.ckpt'}",
                      f"--output_dir={tmp_path / 'out'}")
  assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
      "bert_config.json", "model.json", "model.weights.h5", "vocab.txt"]
  assert checkpoints.read_model_info(output).kind == "pretrainer"
  assert BertConfig.from_json_file(tmp_path / "out" / "bert_config.json") == CONFIG
  assert (tmp_path / "out" / "vocab.txt").read_text() == (folder / "vocab.txt").read_text()
  assert_same_weights(checkpoints.load_encoder(output), model.encoder)
  assert_same_weights(checkpoints.load_pretrainer(output), model)


def test_tf1_to_tf1_is_bit_exact(source, tmp_path):
  folder, _ = source
  run_script("--input_format=tf1", f"--input={folder}", f"--output_dir={tmp_path}",
             "--output_format=tf1")
  original = tf.train.load_checkpoint(str(folder / "bert_model.ckpt"))
  copy = tf.train.load_checkpoint(str(tmp_path / "bert_model.ckpt"))
  assert copy.get_variable_to_shape_map() == original.get_variable_to_shape_map()
  for name in original.get_variable_to_shape_map():
    assert np.array_equal(copy.get_tensor(name).view(np.uint32),
                          original.get_tensor(name).view(np.uint32)), name


def test_loaders_accept_prefix_folder_and_mixed_precision(source):
  folder, model = source
  from_prefix = checkpoints.load_encoder(folder / "bert_model.ckpt")
  assert_same_weights(from_prefix, model.encoder)
  mixed = checkpoints.load_encoder(folder, dtype="mixed_bfloat16")
  assert mixed.transformer_layers[0].compute_dtype == "bfloat16"
  assert_same_weights(mixed, model.encoder)
  with pytest.raises(FileNotFoundError, match="No BERT checkpoint at"):
    checkpoints.load_encoder(folder / "missing")


def test_export_and_restore_into_a_task_model(source, tmp_path):
  _, model = source
  checkpoints.export_pretrained_dir(model, CONFIG.to_dict(), tmp_path / "pretrained", tf1=True)
  assert sorted(p.name for p in (tmp_path / "pretrained").iterdir()) == [
      "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
      "model.json", "model.weights.h5"]
  for path in (tmp_path / "pretrained", tmp_path / "pretrained" / "bert_model.ckpt"):
    classifier = BertClassifier(CONFIG, num_classes=3)
    checkpoints.restore_encoder_weights(classifier, path)
    assert_same_weights(classifier.encoder, model.encoder)
  larger = BertEncoder(BertConfig(**{**CONFIG.to_dict(), "num_attention_heads": 4}))
  with pytest.raises(ValueError, match=r"describes another network.*"
                                       r"num_attention_heads: 2 in .*bert_config.json, 4 in"):
    checkpoints.restore_encoder_weights(larger, tmp_path / "pretrained")


def test_encoder_export_replaces_an_earlier_pretrainer(source, tmp_path):
  _, model = source
  checkpoints.export_pretrained_dir(model, CONFIG, tmp_path)
  encoder = BertEncoder(CONFIG)
  checkpoints.export_pretrained_dir(encoder, CONFIG, tmp_path)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["bert_config.json", "model.json",
                                                        "model.weights.h5"]
  assert checkpoints.read_model_info(tmp_path).kind == "encoder"
  assert_same_weights(checkpoints.load_encoder(tmp_path), encoder)
  with pytest.raises(FileNotFoundError, match="kind 'encoder', without the pre-training heads"):
    checkpoints.load_pretrainer(tmp_path)
  with pytest.raises(ValueError, match="config passed to export_pretrained_dir describes"):
    checkpoints.export_pretrained_dir(encoder, BertConfig(vocab_size=13), tmp_path)


def test_converting_in_place_keeps_the_original_checkpoint(source, tmp_path):
  folder, model = source
  for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001", "bert_config.json",
               "vocab.txt"):
    (tmp_path / name).write_bytes((folder / name).read_bytes())
  checkpoints.convert("tf1", tmp_path, tmp_path)
  assert len(list(tmp_path.iterdir())) == 6
  assert_same_weights(checkpoints.load_pretrainer(tmp_path / "bert_model.ckpt"), model)
  assert_same_weights(checkpoints.load_pretrainer(tmp_path), model)


def test_script_requires_its_flags_and_checks_the_format(source, tmp_path):
  folder, _ = source
  with pytest.raises(flags.IllegalFlagValueError, match="input"):
    run_script("--input_format=tf1", f"--output_dir={tmp_path}")
  with pytest.raises(FileNotFoundError, match="No Hugging Face checkpoint at"):
    run_script("--input_format=hf", f"--input={folder}", f"--output_dir={tmp_path}")


def test_script_runs_as_a_module(source, tmp_path):
  # Both paths file:// URLs, as gs:// ones would be given.
  folder, model = source
  run_python([sys.executable, "-m", "official_bert.cli.convert_checkpoint",
              "--input_format=tf1", f"--input={file_uri(folder)}",
              f"--output_dir={file_uri(tmp_path)}"], check=True)
  assert_same_weights(checkpoints.load_pretrainer(tmp_path), model)
  assert_no_scheme_folders(tmp_path)


def reference_bert(tensors, config, ids, mask):
  """BERT's forward pass in float64 numpy, straight from Hugging Face tensors (`[out, in]`)."""
  def layer_norm(x, name):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-12) * tensors[name + ".weight"] + tensors[
        name + ".bias"]

  def linear(x, name):
    return x @ tensors[name + ".weight"].T + tensors[name + ".bias"]

  erf = np.vectorize(math.erf)
  batch, seq = ids.shape
  heads, size = config.num_attention_heads, config.hidden_size // config.num_attention_heads
  hidden = (tensors["embeddings.word_embeddings.weight"][ids]
            + tensors["embeddings.position_embeddings.weight"][:seq]
            + tensors["embeddings.token_type_embeddings.weight"][np.zeros_like(ids)])
  hidden = layer_norm(hidden, "embeddings.LayerNorm")
  for i in range(config.num_hidden_layers):
    name = f"encoder.layer.{i}."
    query, key, value = (linear(hidden, f"{name}attention.self.{part}").reshape(
        batch, seq, heads, size) for part in ("query", "key", "value"))
    scores = np.einsum("bqnd,bknd->bnqk", query, key) / math.sqrt(size)
    scores = np.where(mask[:, None, None, :] > 0, scores, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = np.einsum("bnqk,bknd->bqnd", probs, value).reshape(batch, seq, heads * size)
    hidden = layer_norm(hidden + linear(context, f"{name}attention.output.dense"),
                        f"{name}attention.output.LayerNorm")
    inner = linear(hidden, f"{name}intermediate.dense")
    inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
    hidden = layer_norm(hidden + linear(inner, f"{name}output.dense"), f"{name}output.LayerNorm")
  return hidden


def test_minilm_converted_by_the_script_matches_reference_and_published_similarity(tmp_path):
  tokenization = pytest.importorskip("official_bert.tokenization")
  folder = minilm_model_dir()
  output = run_script("--input_format=hf", f"--input={folder}", f"--output_dir={tmp_path}")
  assert checkpoints.read_model_info(tmp_path).kind == "encoder"
  encoder = checkpoints.load_encoder(output)
  tokenizer = tokenization.FullTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=True)
  sentences = ["A man is eating food.", "A man is eating a piece of bread.",
               "A man is riding a horse."]
  tokens = [["[CLS]", *tokenizer.tokenize(text), "[SEP]"] for text in sentences]
  ids = np.zeros((len(tokens), max(map(len, tokens))), np.int32)
  for row, pieces in enumerate(tokens):
    ids[row, :len(pieces)] = tokenizer.convert_tokens_to_ids(pieces)
  mask = (np.arange(ids.shape[1]) < np.array([[len(pieces)] for pieces in tokens])).astype(
      np.int32)
  outputs = encoder({"input_word_ids": ids, "input_mask": mask,
                     "input_type_ids": np.zeros_like(ids)})
  sequence = np.asarray(outputs["sequence_output"])
  tensors = {name: value.astype(np.float64)
             for name, value in load_file(str(folder / "model.safetensors")).items()}
  expected = reference_bert(tensors, encoder.config, ids, mask)
  difference = np.abs(sequence - expected).max()
  print(f"MiniLM: max abs difference to the numpy reference {difference:.3g}")
  assert difference < 1e-4
  pooled = (sequence * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
  pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
  similar, different = pooled[0] @ pooled[1], pooled[0] @ pooled[2]
  print(f"MiniLM cosine similarities: {similar:.4f} (published 0.7553), {different:.4f} (~0.247)")
  assert similar == pytest.approx(0.7553, abs=1e-3)
  assert different == pytest.approx(0.247, abs=1e-2)


def test_restore_pretrainer_weights_takes_the_heads_where_the_checkpoint_has_them(source, tmp_path):
  folder, original = source
  from_tf1 = BertPretrainer(CONFIG)
  assert checkpoints.restore_pretrainer_weights(from_tf1, folder / "bert_model.ckpt")
  assert_same_weights(from_tf1, original)

  encoder_only = checkpoints.write_dir(original.encoder, tmp_path / "encoder_only")
  fresh = BertPretrainer(CONFIG)
  heads_before = [w.numpy() for w in fresh.next_sentence.weights]
  assert not checkpoints.restore_pretrainer_weights(fresh, encoder_only)
  assert_same_weights(fresh.encoder, original.encoder)
  for before, after in zip(heads_before, fresh.next_sentence.weights):
    np.testing.assert_array_equal(before, after.numpy())
