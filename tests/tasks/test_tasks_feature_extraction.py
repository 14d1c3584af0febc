"""Tests for official_bert.tasks.feature_extraction and extract_features.py."""

import dataclasses
import json
import math
import os
import sys

import numpy as np
import pytest

from official_bert import BertConfig, BertEncoder, export_pretrained_dir, tokenization
from official_bert.checkpoints import check_init_checkpoint
from official_bert.data import text_lines
from official_bert.tasks import driver, feature_extraction
from official_bert.tasks.base import Modes
from official_bert.tasks.experiment import ExperimentConfig, FeatureExtractionConfig, TrainerConfig

from testing import (
  REPOSITORY,
  SPECIAL_TOKENS,
  assert_no_scheme_folders,
  file_uri,
  minilm_model_dir,
  original_variables,
  run_python,
  shared_data,
  tiny_bert_config,
)

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "."]
VOCAB = SPECIAL_TOKENS + WORDS
CONFIG = tiny_bert_config(len(VOCAB), hidden_size=32, max_position_embeddings=128)
LINES = ["The cat sat on the mat.", "A dog ran far away ||| the cat sat", "", "zebra cat"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
  """A model folder (weights, config, vocab, manifest) of a tiny random encoder."""
  folder = tmp_path_factory.mktemp("tiny_bert")
  vocab_file = folder / "vocab_source.txt"
  vocab_file.write_text("\n".join(VOCAB) + "\n")
  encoder = BertEncoder(CONFIG)
  export_pretrained_dir(encoder, CONFIG, str(folder / "ckpt"), vocab_file=str(vocab_file))
  return encoder, str(folder / "ckpt")


@pytest.fixture
def input_file(tmp_path):
  path = tmp_path / "input.txt"
  path.write_text("\n".join(LINES) + "\n")
  return path


# The settings of `token_run`, which other runs repeat to compare their output with it.
TOKEN_RUN = dict(layers="-1,0", max_seq_length=16, batch_size=3)


@pytest.fixture(scope="module")
def token_run(checkpoint, tmp_path_factory):
  """`LINES` extracted once as token features of layers -1 and 0 (`TOKEN_RUN`), in a folder
  of their own: (the task, the input file, the output file)."""
  input_path = tmp_path_factory.mktemp("token_input") / "input.txt"
  input_path.write_text("\n".join(LINES) + "\n")
  output = tmp_path_factory.mktemp("token_run") / "features.jsonl"
  return _extract(input_path, output, checkpoint[1], **TOKEN_RUN), input_path, output


def _extract(input_file, output_file, init_checkpoint, batch_size=32, export_dir=None,
             **task_args):
  """Runs the task as extract_features.py does (output_dir: the output file's folder)."""
  task = feature_extraction.FeatureExtractionTask(FeatureExtractionConfig(
      input_file=str(input_file), output_file=str(output_file), **task_args))
  driver.run(task, ExperimentConfig(output_dir=os.path.dirname(str(output_file)),
                                    init_checkpoint=init_checkpoint, export_dir=export_dir,
                                    trainer=TrainerConfig(predict_batch_size=batch_size)),
             Modes(predict=True))
  return task


def _read_jsonl(path):
  with open(path) as f:
    return [json.loads(line) for line in f]


def test_token_features_format_and_last_layer(checkpoint, token_run):
  encoder, ckpt = checkpoint
  task, input_file, output = token_run
  assert len(task.examples) == len(LINES) and task.features.num_truncated == 0
  assert task.summary == [f"{input_file}: {len(LINES)} lines, 0 truncated"]
  records = _read_jsonl(output)
  assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
  assert [f["token"] for f in records[1]["features"]] == [
      "[CLS]", "a", "dog", "ran", "far", "away", "[SEP]", "the", "cat", "sat", "[SEP]"]
  assert [f["token"] for f in records[2]["features"]] == ["[CLS]", "[SEP]"]
  assert [f["token"] for f in records[3]["features"]] == ["[CLS]", "[UNK]", "cat", "[SEP]"]
  first = records[0]["features"][0]
  assert list(first) == ["token", "layers"] and list(first["layers"][0]) == ["index", "values"]
  assert [layer["index"] for layer in first["layers"]] == [-1, 0]
  values = np.array([v for r in records for f in r["features"] for layer in f["layers"]
                     for v in layer["values"]])
  assert len(first["layers"][0]["values"]) == CONFIG.hidden_size
  np.testing.assert_array_equal(values, np.round(values, 6))

  # The -1 layer is the encoder's sequence_output on the real tokens of the packed example.
  tokenizer = tokenization.FullTokenizer(os.path.join(ckpt, "vocab.txt"))
  examples = text_lines.read_examples(str(input_file))
  features = feature_extraction.convert_examples_to_features(examples, tokenizer, 16)
  outputs = encoder({"input_word_ids": features.input_word_ids,
                     "input_mask": features.input_mask,
                     "input_type_ids": features.input_type_ids})
  assert features.input_type_ids[1].tolist()[:12] == [0] * 7 + [1] * 4 + [0]
  for n, record in enumerate(records):
    length = len(record["features"])
    for i, index in enumerate((-1, 0)):
      got = np.array([f["layers"][i]["values"] for f in record["features"]])
      want = outputs["sequence_output"] if index == -1 else outputs["encoder_outputs"][0]
      np.testing.assert_allclose(got, np.asarray(want)[n, :length], atol=2e-5)


def test_pooled_embeddings_cls_and_mean(checkpoint, token_run, tmp_path):
  _, input_file, tokens_file = token_run
  cls_file, mean_file = (tmp_path / f"{n}.jsonl" for n in ("cls", "mean"))
  # At the token run's sequence length; its first layer listed is -1, the one pooled.
  _extract(input_file, cls_file, checkpoint[1], pooling="cls", normalize=True, max_seq_length=16)
  _extract(input_file, mean_file, checkpoint[1], pooling="mean", max_seq_length=16)
  token_records = _read_jsonl(tokens_file)
  assert len(token_records) == len(_read_jsonl(cls_file)) == len(_read_jsonl(mean_file))
  for record, cls, mean in zip(token_records, _read_jsonl(cls_file), _read_jsonl(mean_file)):
    assert cls["linex_index"] == mean["linex_index"] == record["linex_index"]
    assert record["features"][0]["layers"][0]["index"] == -1
    vectors = np.array([f["layers"][0]["values"] for f in record["features"]])
    np.testing.assert_allclose(cls["embedding"], vectors[0] / np.linalg.norm(vectors[0]),
                               atol=1e-5)
    np.testing.assert_allclose(mean["embedding"], vectors.mean(axis=0), atol=1e-5)


def test_minilm_mean_embeddings_reproduce_published_similarities(tmp_path):
  model_dir = minilm_model_dir()
  input_file = tmp_path / "sentences.txt"
  input_file.write_text("A man is eating food.\nA man is eating a piece of bread.\n"
                        "A man is riding a horse.\n")
  output = tmp_path / "embeddings.jsonl"
  _extract(input_file, output, str(model_dir), pooling="mean", normalize=True)
  food, bread, horse = (np.array(r["embedding"]) for r in _read_jsonl(output))
  assert np.linalg.norm(food) == pytest.approx(1.0, abs=1e-5)
  assert food @ bread == pytest.approx(0.7553, abs=1e-3)
  assert food @ horse == pytest.approx(0.247, abs=1e-2)


def test_truncation_follows_the_original(checkpoint, tmp_path):
  tokenizer = tokenization.FullTokenizer(os.path.join(checkpoint[1], "vocab.txt"))
  examples = [text_lines.InputExample(0, "the cat sat on the mat", None),
              text_lines.InputExample(1, "the cat sat on the mat", "a dog"),
              # A second text without tokens leaves one text, as in the original.
              text_lines.InputExample(2, "the cat sat on the mat", "\x07")]
  features = feature_extraction.convert_examples_to_features(examples, tokenizer, 7)
  assert features.tokens == (["[CLS]", "the", "cat", "sat", "on", "the", "[SEP]"],
                             ["[CLS]", "the", "cat", "[SEP]", "a", "dog", "[SEP]"],
                             ["[CLS]", "the", "cat", "sat", "on", "the", "[SEP]"])
  assert features.input_type_ids[2].tolist() == [0] * 7
  assert features.num_truncated == 3


def test_bytes_that_are_not_utf8_are_dropped_counted_and_reported(checkpoint, tmp_path, caplog):
  bad = tmp_path / "bad.txt"
  bad.write_bytes(b"the cat\n\xff\xfethe dog ran\n a \xc3 dog ||| the\xe9 cat\n")
  output = tmp_path / "out.jsonl"
  task = _extract(bad, output, checkpoint[1], layers="-1", max_seq_length=16)
  # The original's decode("utf-8", "ignore"): the stray bytes go, the rest of each line stays.
  assert [(e.text_a, e.text_b) for e in task.examples] == [
      ("the cat", None), ("the dog ran", None), ("a  dog", "the cat")]
  assert task.summary[-1] == (f"{bad}: 3 lines, 0 truncated, {bad}: dropped 4 byte(s) that are "
                              "not UTF-8 on 2 line(s) (lines 2, 3), as the original did")
  assert f"{bad}: dropped 4 byte(s) that are not UTF-8 on 2 line(s)" in caplog.text
  assert len(_read_jsonl(output)) == 3


def test_bad_input_is_named(checkpoint, tmp_path):
  ckpt = checkpoint[1]
  good = tmp_path / "good.txt"
  good.write_text("the cat\n")
  output = tmp_path / "out.jsonl"
  with pytest.raises(ValueError, match="layer index 2 is outside the encoder's 2 layers"):
    _extract(good, output, ckpt, layers="-1,2")
  with pytest.raises(ValueError, match=r"up to sequence length 128 \(max_position_embeddings\)"):
    _extract(good, output, ckpt, max_seq_length=200)
  with pytest.raises(ValueError, match="pooling must be one of"):
    _extract(good, output, ckpt, pooling="max")
  with pytest.raises(ValueError, match="needs init_checkpoint"):
    _extract(good, output, None)
  with pytest.raises(ValueError, match="cannot train"):
    feature_extraction.FeatureExtractionTask(FeatureExtractionConfig(
        input_file=str(good), output_file=str(output))).validate(Modes(train=True, predict=True),
                                                                 check_init_checkpoint(ckpt))
  taken = tmp_path / "taken_export"
  taken.mkdir()
  (taken / "saved_model.pb").write_text("")
  with pytest.raises(FileExistsError, match="holds files that are no export of this package"):
    _extract(good, output, ckpt, layers="-1", export_dir=str(taken))
  assert not output.exists()


def test_checkpoints_beside_the_output_are_ignored_and_nothing_is_added(checkpoint, token_run,
                                                                        tmp_path):
  import tensorflow as tf

  ckpt = checkpoint[1]
  _, input_file, clean = token_run  # a run in a folder of its own
  # A training checkpoint of another encoder of the same shape lies in the output folder.
  busy = tmp_path / "busy"
  tf.train.CheckpointManager(
      tf.train.Checkpoint(model=BertEncoder(CONFIG),
                          global_step=tf.Variable(5, dtype=tf.int64)), str(busy), 1).save()
  before = sorted(os.listdir(busy))
  _extract(input_file, busy / "features.jsonl", ckpt, **TOKEN_RUN)
  assert (busy / "features.jsonl").read_text() == clean.read_text()
  assert sorted(os.listdir(busy)) == sorted(before + ["features.jsonl"])
  assert os.listdir(clean.parent) == ["features.jsonl"]


def test_a_failed_run_leaves_the_old_output(checkpoint, input_file, tmp_path, monkeypatch):
  output = tmp_path / "out.jsonl"
  output.write_text("old\n")

  def failing_lines(*args):
    yield "new\n"
    raise RuntimeError("encoder failed")

  monkeypatch.setattr(feature_extraction, "_token_lines", failing_lines)
  with pytest.raises(RuntimeError, match="encoder failed"):
    _extract(input_file, output, checkpoint[1], layers="-1", max_seq_length=16)
  assert output.read_text() == "old\n"
  assert sorted(os.listdir(tmp_path)) == ["input.txt", "out.jsonl"]


def original_encoder_layers(prefix, config, ids, segments, mask, gelu="tanh"):
  """Every layer's output of the original `modeling.py` in float64 numpy, from TF1 variables.

  Args:
    prefix: an original `bert_model.ckpt` prefix.
    config: its `BertConfig` (sizes only).
    ids, segments, mask: int `[batch, seq]` inputs.
    gelu: `"tanh"` (the original's `gelu`) or `"erf"`.
  """
  import tensorflow as tf

  reader = tf.train.load_checkpoint(str(prefix))

  def get(name):
    return reader.get_tensor(name).astype(np.float64)

  def dense(x, name):
    return x @ get(f"{name}/kernel") + get(f"{name}/bias")

  def layer_norm(x, name):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-12) * get(f"{name}/gamma") + get(f"{name}/beta")

  def activation(x):
    if gelu == "tanh":
      return 0.5 * x * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))

  batch, seq = ids.shape
  heads = config.num_attention_heads
  size = config.hidden_size // heads
  hidden = (get("bert/embeddings/word_embeddings")[ids]
            + get("bert/embeddings/token_type_embeddings")[segments]
            + get("bert/embeddings/position_embeddings")[:seq])
  hidden = layer_norm(hidden, "bert/embeddings/LayerNorm")
  adder = (1.0 - mask[:, None, None, :]) * -10000.0
  layers = []
  for i in range(config.num_hidden_layers):
    name = f"bert/encoder/layer_{i}"
    query, key, value = (dense(hidden, f"{name}/attention/self/{part}").reshape(
        batch, seq, heads, size) for part in ("query", "key", "value"))
    scores = np.einsum("bqnd,bknd->bnqk", query, key) / math.sqrt(size) + adder
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = np.einsum("bnqk,bknd->bqnd", probs, value).reshape(batch, seq, heads * size)
    hidden = layer_norm(hidden + dense(context, f"{name}/attention/output/dense"),
                        f"{name}/attention/output/LayerNorm")
    inner = activation(dense(hidden, f"{name}/intermediate/dense"))
    hidden = layer_norm(hidden + dense(inner, f"{name}/output/dense"),
                        f"{name}/output/LayerNorm")
    layers.append(hidden)
  return layers


def write_original_checkpoint(folder, config, vocab, seed=0):
  """Writes an original-format TF1 checkpoint (names and layouts of `modeling.py`) and config.

  The weights are drawn with a standard deviation of 0.3, so that the feed-forward
  pre-activations reach the range where the tanh and erf GELUs differ.
  """
  import tensorflow as tf

  variables = original_variables(config, heads=False, seed=seed)
  names = sorted(variables)
  values = [(1.0 if name.endswith("gamma") else 0.0) + 0.3 * variables[name] for name in names]
  folder.mkdir(parents=True, exist_ok=True)
  tf.raw_ops.SaveV2(prefix=str(folder / "bert_model.ckpt"), tensor_names=names,
                    shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(value, tf.float32) for value in values])
  (folder / "bert_config.json").write_text(json.dumps(dict(config.to_dict(), hidden_act="gelu")))
  (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
  return folder / "bert_model.ckpt"


def _check_features_match_the_original(prefix, lines, tmp_path):
  """Extracts the last two layers of `lines` and compares them with the numpy forward pass."""
  from official_bert import checkpoints

  config = BertConfig.from_json_file(os.path.join(os.path.dirname(prefix), "bert_config.json"))
  assert config.hidden_act == "gelu_tanh"
  input_file = tmp_path / "lines.txt"
  input_file.write_text("\n".join(lines) + "\n")
  output = tmp_path / "features.jsonl"
  task = _extract(input_file, output, str(prefix), layers="-1,-2",
                  max_seq_length=config.max_position_embeddings)
  features = task.features
  inputs = (features.input_word_ids, features.input_type_ids, features.input_mask)
  expected = original_encoder_layers(prefix, config, *inputs)
  encoder = checkpoints.load_encoder(str(prefix))
  sequence_output = np.asarray(encoder(dict(zip(
      ("input_word_ids", "input_type_ids", "input_mask"), inputs)))["sequence_output"])
  real = features.input_mask.astype(bool)
  np.testing.assert_allclose(sequence_output[real], expected[-1][real], rtol=0, atol=1e-5)
  for n, record in enumerate(_read_jsonl(output)):
    length = len(record["features"])
    for i, layer in enumerate((-1, -2)):
      got = np.array([f["layers"][i]["values"] for f in record["features"]])
      np.testing.assert_allclose(got, expected[layer][n, :length], rtol=0, atol=1e-5)
  return config, inputs, expected


def test_features_of_an_original_checkpoint_are_the_originals_tanh_gelu_network(tmp_path):
  config = tiny_bert_config(len(VOCAB), max_position_embeddings=16)
  prefix = write_original_checkpoint(tmp_path / "original", config, VOCAB)
  lines = ["the cat sat on the mat .", "a dog ran ||| far away", "the"]
  config, inputs, expected = _check_features_match_the_original(prefix, lines, tmp_path)
  # The check tells the two GELUs apart on these weights.
  with_erf = original_encoder_layers(prefix, config, *inputs, gelu="erf")
  real = inputs[2].astype(bool)
  assert np.abs(with_erf[-1][real] - expected[-1][real]).max() > 1e-4


def test_features_of_the_shared_tiny_tf1_checkpoint_match_the_original(tmp_path):
  folder = shared_data("checkpoints/tf1_tiny_random")
  _check_features_match_the_original(folder / "bert_model.ckpt",
                                     ["all work and no play", "makes jack ||| a dull boy"],
                                     tmp_path)


def test_the_originals_tpu_and_one_hot_flags_parse_and_are_reported_as_ignored():
  code = ("from official_bert.cli import extract_features as tool; tool.define_flags(); "
          "tool.FLAGS(['extract_features.py', '--use_tpu=true', '--master=grpc://10.0.0.2:8470', "
          "'--num_tpu_cores=8', '--use_one_hot_embeddings=true']); "
          "print(tool.FLAGS.use_tpu, tool.FLAGS.master, tool.FLAGS.num_tpu_cores, "
          "tool.FLAGS.use_one_hot_embeddings, *tool.ignored_flags_set())")
  result = run_python([sys.executable, "-c", code], cwd=REPOSITORY, timeout=120)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.split() == ["True", "grpc://10.0.0.2:8470", "8", "True", "use_tpu",
                                   "master", "use_one_hot_embeddings"]


def test_script_writes_features_and_exports_the_encoder(input_file, tmp_path):
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the ops the SavedModel's tokenizer uses)

  # A one-layer encoder: the script's work does not depend on depth, and each layer adds to the
  # tracing of its extraction and export and to the compiling of the two signatures called here.
  config = dataclasses.replace(CONFIG, num_hidden_layers=1)
  (tmp_path / "vocab_source.txt").write_text("\n".join(VOCAB) + "\n")
  checkpoint = str(tmp_path / "ckpt")
  export_pretrained_dir(BertEncoder(config), config, checkpoint,
                        vocab_file=str(tmp_path / "vocab_source.txt"))
  # Every path a file:// URL, as gs:// ones would be given.
  output, export_dir = tmp_path / "out" / "features.jsonl", tmp_path / "encoder_savedmodel"
  command = [sys.executable, os.path.join(REPOSITORY, "extract_features.py"),
             f"--input_file={file_uri(input_file)}", f"--output_file={file_uri(output)}",
             f"--init_checkpoint={file_uri(checkpoint)}", "--layers=-1",
             "--max_seq_length=16", "--batch_size=2", f"--export_dir={file_uri(export_dir)}",
             # Commands written for the original may pass these: accepted, and ignored.
             "--use_tpu=false", "--num_tpu_cores=8", "--use_one_hot_embeddings=true"]
  result = run_python(command, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "--use_one_hot_embeddings=True is ignored: it chose a one-hot matmul" in result.stderr
  assert_no_scheme_folders(tmp_path)
  records = _read_jsonl(output)
  assert len(records) == len(LINES)

  served = tf.saved_model.load(str(export_dir))
  from_text = served.signatures["serving_default"](text=tf.constant([LINES[0], LINES[3]]))
  pair = served.signatures["serve_text_pair"](text_a=tf.constant(["A dog ran far away"]),
                                              text_b=tf.constant(["the cat sat"]))
  for outputs, row, record in ((from_text, 0, records[0]), (from_text, 1, records[3]),
                               (pair, 0, records[1])):
    want = np.array([f["layers"][0]["values"] for f in record["features"]])
    assert int(outputs["input_mask"][row].numpy().sum()) == len(want)
    np.testing.assert_allclose(outputs["sequence_output"][row, :len(want)], want, atol=2e-5)
    np.testing.assert_allclose(outputs["encoder_outputs"][-1, row, :len(want)], want, atol=2e-5)
  assert from_text["pooled_output"].shape == (2, config.hidden_size)
