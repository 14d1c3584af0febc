"""Feature-based use of BERT: per-token activations of chosen layers, or one vector per text.

`FeatureExtractionTask` is the library behind `extract_features.py`: a task that only predicts,
run by `driver.run` with `Modes(predict=True)`. Its model is the pre-trained `BertEncoder` of
the run's `init_checkpoint` (required: the features of a random encoder are meaningless). Its
input has one text a line, a pair of texts separated by ` ||| `; each is packed as
`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` (the longer text losing tokens first when the pair
does not fit, as in the original). Its output, `output_file`, has one JSON object a line, in the
format of the original release:

    {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1,
      "values": [0.123457, ...]}, ...]}, ...]}

with every value rounded to 6 decimals. With `pooling` set, each line is instead one vector,
`{"linex_index": 0, "embedding": [...]}`: the `[CLS]` vector (`cls`) or the mean over the real
tokens, `[CLS]` and `[SEP]` included (`mean`, sentence-transformers' pooling) of one layer,
L2-normalised with `normalize`, so that dot products are cosine similarities. With the run's
`export_dir` set, the encoder is also exported as a SavedModel (`FeatureExtractionTask.save`).

The run's `output_dir` holds nothing of this task: the task never resumes from a checkpoint
there (`resumes = False`; the encoder always comes from `init_checkpoint`) and writes only
`output_file`. The tool passes the folder of `--output_file`, so that a run creates that folder
and nothing else.

Example:

  task = FeatureExtractionConfig(input_file="input.txt", output_file="out/features.jsonl",
                                 layers="-1,-2")
  driver.run_experiment(ExperimentConfig(task=task, output_dir="out",
                                         init_checkpoint="uncased_L-4_H-256_A-4"),
                        Modes(predict=True))
  task = FeatureExtractionConfig(input_file="input.txt", output_file="out/embeddings.jsonl",
                                 pooling="mean", normalize=True, do_lower_case=True)
  driver.run_experiment(ExperimentConfig(task=task, output_dir="out",
                                         init_checkpoint="all-MiniLM-L6-v2",
                                         trainer=TrainerConfig(predict_batch_size=64)),
                        Modes(predict=True))
"""

import dataclasses
import json
import os
import time

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert import export, tokenization
from official_bert.checkpoints import VOCAB_NAME, read_config
from official_bert.common import file_io
from official_bert.data.text_lines import read_examples
from official_bert.export import archive
from official_bert.networks.bert_encoder import BertEncoder
from official_bert.tasks import base, experiment
from official_bert.tokenization import utf8

POOLINGS = ("cls", "mean")
_DECIMALS = 6
_LOG_EVERY_BATCHES = 100
_NEEDS_CHECKPOINT = ("Feature extraction needs init_checkpoint (a pre-trained model): the "
                     "features of an untrained encoder are meaningless.")


@dataclasses.dataclass(frozen=True)
class ExtractionFeatures:
  """Packed inputs of a list of examples.

  Attributes:
    tokens: per example, its WordPiece tokens with `[CLS]` and `[SEP]` (the output's `token`s).
    input_word_ids: int32 `[num_examples, max_seq_length]`, padded with 0.
    input_mask: int32, 1 on real tokens.
    input_type_ids: int32, 0 up to the first `[SEP]`, 1 after.
    num_truncated: examples that were longer than `max_seq_length` and lost tokens.
  """
  tokens: tuple
  input_word_ids: np.ndarray
  input_mask: np.ndarray
  input_type_ids: np.ndarray
  num_truncated: int


def convert_examples_to_features(examples, tokenizer, max_seq_length):
  """Tokenizes and packs the examples as the original `extract_features.py` does.

  Args:
    examples: `InputExample`s.
    tokenizer: a `tokenization.FullTokenizer`.
    max_seq_length: length of every packed sequence, at least 3.

  Returns:
    `ExtractionFeatures`.
  """
  if max_seq_length < 3:
    raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
  shape = (len(examples), max_seq_length)
  word_ids, mask, type_ids = (np.zeros(shape, np.int32) for _ in range(3))
  all_tokens, num_truncated = [], 0
  for i, example in enumerate(examples):
    tokens_a = tokenizer.tokenize(example.text_a)
    # As in the original, a second text without tokens leaves a single one, `[CLS] a [SEP]`.
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else []
    if not tokens_b:
      if len(tokens_a) > max_seq_length - 2:
        num_truncated += 1
        tokens_a = tokens_a[:max_seq_length - 2]
      tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    else:
      if len(tokens_a) + len(tokens_b) > max_seq_length - 3:
        num_truncated += 1
        tokenization.truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
      tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
    word_ids[i, :len(tokens)] = tokenizer.convert_tokens_to_ids(tokens)
    mask[i, :len(tokens)] = 1
    type_ids[i, len(tokens_a) + 2:len(tokens)] = 1
    all_tokens.append(tokens)
  if num_truncated:
    logging.warning("%d of %d examples were longer than max_seq_length=%d and were truncated.",
                    num_truncated, len(examples), max_seq_length)
  return ExtractionFeatures(tuple(all_tokens), word_ids, mask, type_ids, num_truncated)


def parse_layers(layers, num_layers):
  """Parses `"-1,-2"` (or a list of ints) into layer indexes, checked against `num_layers`.

  Indexes count as in a Python list of the transformer layers' outputs: 0 is the first layer,
  -1 the last.

  Args:
    layers: comma-separated string or sequence of ints.
    num_layers: the encoder's `num_hidden_layers`.

  Returns:
    A list of ints, in the given order.
  """
  if isinstance(layers, str):
    try:
      layers = [int(x) for x in layers.split(",") if x.strip()]
    except ValueError as e:
      raise ValueError(f"layers must be comma-separated integers, got {layers!r}") from e
  layers = list(layers)
  if not layers:
    raise ValueError("layers is empty: name at least one layer, e.g. -1 for the last")
  for index in layers:
    if not -num_layers <= index < num_layers:
      raise ValueError(f"layer index {index} is outside the encoder's {num_layers} layers "
                       f"(valid: {-num_layers} .. {num_layers - 1})")
  return layers


def make_dataset(features, batch_size):
  """One pass over the features in order, each batch cut to its longest sequence.

  Attention never reaches padding, so the real tokens' outputs do not depend on how much there
  is; cutting it saves the encoder's time on short texts.

  Args:
    features: `ExtractionFeatures`.
    batch_size: examples per batch.

  Returns:
    A `tf.data.Dataset` of dicts of int32 `[batch, length]` encoder inputs.
  """
  def trim(batch):
    length = tf.reduce_max(tf.reduce_sum(batch["input_mask"], axis=1))
    return {name: tensor[:, :length] for name, tensor in batch.items()}

  dataset = tf.data.Dataset.from_tensor_slices({
      "input_word_ids": features.input_word_ids, "input_mask": features.input_mask,
      "input_type_ids": features.input_type_ids})
  return dataset.batch(batch_size).map(trim).prefetch(tf.data.AUTOTUNE)


def pool(sequence, input_mask, pooling, normalize):
  """Pools `[batch, seq, hidden]` vectors into `[batch, hidden]` ones.

  Args:
    sequence: a layer's output.
    input_mask: `[batch, seq]`, 1 on real tokens.
    pooling: `cls` (the first token) or `mean` (the mean over the real tokens).
    normalize: divide each vector by its L2 norm.

  Returns:
    float32 `[batch, hidden]`.
  """
  sequence = tf.cast(sequence, tf.float32)
  if pooling == "cls":
    pooled = sequence[:, 0]
  elif pooling == "mean":
    weights = tf.cast(input_mask, tf.float32)[:, :, None]
    pooled = tf.reduce_sum(sequence * weights, 1) / tf.maximum(tf.reduce_sum(weights, 1), 1.0)
  else:
    raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
  return tf.math.l2_normalize(pooled, axis=-1) if normalize else pooled


def _rounded(vector):
  return [round(value, _DECIMALS) for value in vector.tolist()]


def _token_lines(batch_tokens, batch_ids, outputs, layer_indexes):
  """The output lines of a batch: per token, the values of each requested layer."""
  for n, (tokens, unique_id) in enumerate(zip(batch_tokens, batch_ids)):
    token_features = [
        {"token": token,
         "layers": [{"index": index, "values": _rounded(output[n, position])}
                    for index, output in zip(layer_indexes, outputs)]}
        for position, token in enumerate(tokens)]
    yield json.dumps({"linex_index": unique_id, "features": token_features}) + "\n"


def _default_vocab(init_checkpoint):
  """The `vocab.txt` in the checkpoint's folder (or the prefix's folder), or None."""
  path = os.fspath(init_checkpoint)
  for folder in (path, os.path.dirname(path)):
    candidate = os.path.join(folder, VOCAB_NAME)
    if folder and file_io.is_file(candidate):
      return candidate
  return None


@base.register(experiment.FeatureExtractionConfig)
class FeatureExtractionTask(base.Task):
  """Runs a pre-trained encoder over a text file and writes its activations as JSON lines.

  Only predicts, from the run's `init_checkpoint` (a converted folder, an original TF1
  `bert_model.ckpt` prefix or folder, or a Hugging Face folder; see
  `official_bert.checkpoints.load_encoder`), in batches of the run's `predict_batch_size`.

  Args:
    config: the task's settings, a `FeatureExtractionConfig` (the input, the output file, the
      layers or pooling).
    bert_config: the encoder's `BertConfig`; by default that of `config.bert_config_file`, or
      the one beside the init checkpoint.

  Attributes (after `validate`):
    examples: the `data.text_lines.InputExample`s read.
    features: their `ExtractionFeatures` (`num_truncated` counts the truncated ones).
    layer_indexes: the layers written (`[pooling_layer]` with pooling).

  Example (a small random encoder stands in for a pre-trained one):

  >>> import os, tempfile
  >>> from official_bert import BertConfig, BertEncoder, export_pretrained_dir
  >>> from official_bert.tasks import driver
  >>> from official_bert.tasks.base import Modes
  >>> from official_bert.tasks.experiment import ExperimentConfig, FeatureExtractionConfig
  >>> temporary = tempfile.TemporaryDirectory()
  >>> folder = temporary.name
  >>> with open(os.path.join(folder, "words.txt"), "w") as f:
  ...   _ = f.write("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\nhello\\nworld\\n")
  >>> config = BertConfig(vocab_size=6, hidden_size=8, num_hidden_layers=2,
  ...                     num_attention_heads=2, intermediate_size=16)
  >>> model = export_pretrained_dir(BertEncoder(config), config, os.path.join(folder, "model"),
  ...                               vocab_file=os.path.join(folder, "words.txt"))
  >>> with open(os.path.join(folder, "input.txt"), "w") as f:
  ...   _ = f.write("hello world\\nhello ||| world\\n")
  >>> task = FeatureExtractionTask(FeatureExtractionConfig(
  ...     input_file=os.path.join(folder, "input.txt"),
  ...     output_file=os.path.join(folder, "out", "features.jsonl"), layers="-1,0"))
  >>> _ = driver.run(task, ExperimentConfig(output_dir=os.path.join(folder, "out"),
  ...                                       init_checkpoint=model), Modes(predict=True))
  >>> with open(os.path.join(folder, "out", "features.jsonl")) as f:
  ...   first = json.loads(f.readline())
  >>> [token["token"] for token in first["features"]]
  ['[CLS]', 'hello', 'world', '[SEP]']
  >>> [layer["index"] for layer in first["features"][0]["layers"]]
  [-1, 0]
  >>> os.listdir(os.path.join(folder, "out"))
  ['features.jsonl']
  >>> temporary.cleanup()
  """

  name = "feature extraction"
  supported_modes = ("predict",)
  # The encoder always comes from init_checkpoint: output_file's folder may hold anything.
  resumes = False

  def __init__(self, config=None, bert_config=None):
    super().__init__(config, bert_config)
    self.examples = self.features = self.layer_indexes = None

  def validate(self, modes, init_checkpoint=None, *, export_dir=None, export_format="saved_model",
               **paths):
    """Checks the options and `export_dir`, reads the config, the vocabulary and the whole
    input, and packs it, before the encoder is built."""
    config = self.config
    if config.pooling is not None and config.pooling not in POOLINGS:
      raise ValueError(f"pooling must be one of {POOLINGS} or None, got {config.pooling!r}")
    if not init_checkpoint:
      raise ValueError(_NEEDS_CHECKPOINT)
    if export_format != "saved_model":
      raise ValueError(f"Feature extraction exports its encoder as a SavedModel; for "
                       f"export_format={export_format}, export the model folder of "
                       f"{os.fspath(init_checkpoint)} with export_saved_model.py --format.")
    if export_dir:
      # Before the long part: a taken export_dir would otherwise fail only at the end.
      archive.check_export_dir(export_dir, overwrite=False)
    self.bert_config = read_config(init_checkpoint, self.bert_config or config.bert_config_file)
    vocab_file = config.vocab_file or _default_vocab(init_checkpoint)
    if vocab_file is None:
      raise ValueError(f"No vocab_file given and no {VOCAB_NAME} beside "
                       f"{os.fspath(init_checkpoint)}")
    # The run records the vocabulary it found, as if it had been given.
    self.config = config = dataclasses.replace(config, vocab_file=vocab_file)
    super().validate(modes, init_checkpoint, **paths)
    self.layer_indexes = parse_layers([config.pooling_layer] if config.pooling else config.layers,
                                      self.bert_config.num_hidden_layers)
    dropped = utf8.DroppedBytes(config.input_file)
    self.examples = read_examples(config.input_file, dropped)
    if any(example.text_b is not None for example in self.examples):
      self.check_segments(2, f"The text pairs ('a ||| b') of {config.input_file}")
    self.features = convert_examples_to_features(self.examples, self.tokenizer,
                                                 config.max_seq_length)
    self.summary.append(f"{config.input_file}: {len(self.examples)} lines, "
                        f"{self.features.num_truncated} truncated"
                        + (f", {dropped.message()}" if dropped.num_bytes else ""))

  # === The model: the pre-trained encoder ===

  def build_model(self):
    return BertEncoder(self.bert_config, kernels=self.kernels)

  def loss(self, outputs, labels):
    raise NotImplementedError("Feature extraction does not train.")

  def untrained(self, output_dir):
    """Nothing to warn of: the encoder came from `init_checkpoint`, which `validate` requires."""

  # === The outputs ===

  def predict_split(self, split, runner, output_dir):
    """Encodes the input in batches of the run's `predict_batch_size` and writes `output_file`
    as the batches come (not in `output_dir`: the tool passes its folder): the activations of
    a large input do not fit in memory."""
    del split, output_dir
    start, batch_size = time.perf_counter(), runner.config.trainer.predict_batch_size
    encoder, pooling, normalize, layer_indexes = (runner.model, self.config.pooling,
                                                  self.config.normalize, self.layer_indexes)
    examples, features = self.examples, self.features

    @tf.function(reduce_retracing=True, autograph=False)
    def encode(inputs):
      layer_outputs = encoder(inputs, training=False)["encoder_outputs"]
      selected = [tf.cast(layer_outputs[i], tf.float32) for i in layer_indexes]
      if pooling:
        return [pool(selected[0], inputs["input_mask"], pooling, normalize)]
      return selected

    output_file = os.fspath(self.config.output_file)
    folder = os.path.dirname(output_file)
    if folder:
      tf.io.gfile.makedirs(folder)
    with file_io.atomic_write(output_file) as f:
      begin = 0
      dataset = make_dataset(features, batch_size)
      for batch_number, inputs in enumerate(dataset, start=1):
        outputs = [output.numpy() for output in encode(inputs)]
        end = begin + len(outputs[0])
        ids = [example.unique_id for example in examples[begin:end]]
        if pooling:
          lines = (json.dumps({"linex_index": unique_id, "embedding": _rounded(vector)}) + "\n"
                   for unique_id, vector in zip(ids, outputs[0]))
        else:
          lines = _token_lines(features.tokens[begin:end], ids, outputs, layer_indexes)
        f.write("".join(lines))
        if batch_number % _LOG_EVERY_BATCHES == 0:
          logging.info("Encoded %d of %d lines.", end, len(examples))
        begin = end
    logging.info("Wrote %s for %d lines (%d truncated) to %s in %.1f s.",
                 f"{pooling} embeddings" if pooling else f"layers {layer_indexes}",
                 len(examples), features.num_truncated, output_file,
                 time.perf_counter() - start)
    return None, [output_file]

  def save(self, model, output_dir, export_dir=None, **export_settings):
    """Exports the encoder to `export_dir` (raw text or token ids in; `sequence_output`,
    `pooled_output` and `encoder_outputs` out, like TF Hub's BERT encoders; see
    `official_bert.export.export_encoder`); writes nothing in `output_dir`."""
    del output_dir, export_settings  # a SavedModel: `validate` refused the other formats
    if not export_dir:
      return []
    config = self.config
    return [export.export_encoder(model, export_dir,
                                  vocab_file=config.vocab_file, do_lower_case=config.do_lower_case,
                                  max_seq_length=config.max_seq_length,
                                  dtype=export.trained_dtype(model))]
