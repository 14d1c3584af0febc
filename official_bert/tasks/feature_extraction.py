"""Feature-based use of BERT: per-token activations of chosen layers, or one vector per text.

`extract_features` is the library behind `extract_features.py`. Its input has one text a line, a
pair of texts separated by ` ||| `; each is packed as `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`
(the longer text losing tokens first when the pair does not fit, as in the original). The output
has one JSON object a line, in the format of the original release:

    {"linex_index": 0, "features": [{"token": "[CLS]", "layers": [{"index": -1,
      "values": [0.123457, ...]}, ...]}, ...]}

with every value rounded to 6 decimals. With `pooling` set, each line is instead one vector,
`{"linex_index": 0, "embedding": [...]}`: the `[CLS]` vector (`cls`) or the mean over the real
tokens, `[CLS]` and `[SEP]` included (`mean`, sentence-transformers' pooling) of one layer,
L2-normalised with `normalize`, so that dot products are cosine similarities.

Example:

  summary = extract_features("input.txt", "output.jsonl", init_checkpoint="uncased_L-4_H-256_A-4",
                             layers="-1,-2")
  summary = extract_features("input.txt", "embeddings.jsonl", init_checkpoint="all-MiniLM-L6-v2",
                             pooling="mean", normalize=True)
"""

import dataclasses
import json
import os
import re
import tempfile
import time

from absl import logging
import numpy as np
import tensorflow as tf

from official_bert import export, tokenization
from official_bert.checkpoints import VOCAB_NAME, load_encoder

POOLINGS = ("cls", "mean")
# The separator of a text pair on one input line: the original's regex, `^(.*) \|\|\| (.*)$`.
_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")
_DECIMALS = 6
_LOG_EVERY_BATCHES = 100


@dataclasses.dataclass(frozen=True)
class InputExample:
  """One input line.

  Attributes:
    unique_id: the line's index in the file, from 0 (`linex_index` in the output).
    text_a: the text, or the first of a pair.
    text_b: the second text of a pair, else None.
  """
  unique_id: int
  text_a: str
  text_b: str | None


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


def read_examples(input_file):
  """Reads one example per line; ` ||| ` separates the two texts of a pair.

  Every line counts, blank ones too (they give `[CLS] [SEP]`), so `unique_id` is the line index.

  Args:
    input_file: UTF-8 text file.

  Returns:
    A list of `InputExample`.

  Raises:
    ValueError: naming the line that is not valid UTF-8, or an empty file.
  """
  examples = []
  with open(input_file, "rb") as f:
    for index, raw_line in enumerate(f):
      try:
        line = raw_line.decode("utf-8").strip()
      except UnicodeDecodeError as e:
        raise ValueError(f"{input_file}:{index + 1}: not valid UTF-8 at byte {e.start + 1}") from e
      match = _PAIR.match(line)
      text_a, text_b = (match.group(1), match.group(2)) if match else (line, None)
      examples.append(InputExample(index, text_a, text_b))
  if not examples:
    raise ValueError(f"{input_file} is empty: expected one text per line")
  logging.info("Read %d lines (%d pairs) from %s.", len(examples),
               sum(e.text_b is not None for e in examples), input_file)
  return examples


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
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b is not None else None
    if tokens_b is None:
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
    if folder and os.path.isfile(candidate):
      return candidate
  return None


def _write_atomically(output_file, lines):
  """Writes the lines to a temporary file beside `output_file`, then renames it into place."""
  folder = os.path.dirname(os.path.abspath(output_file))
  os.makedirs(folder, exist_ok=True)
  with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder, delete=False,
                                   prefix=os.path.basename(output_file) + ".",
                                   suffix=".tmp") as f:
    try:
      f.writelines(lines)
    except BaseException:
      f.close()
      os.remove(f.name)
      raise
  os.replace(f.name, output_file)


def extract_features(input_file, output_file, init_checkpoint, vocab_file=None,
                     bert_config_file=None, layers="-1,-2,-3,-4", do_lower_case=True,
                     max_seq_length=128, batch_size=32, pooling=None, pooling_layer=-1,
                     normalize=False, export_dir=None):
  """Runs a pre-trained encoder over a text file and writes its activations as JSON lines.

  Args:
    input_file: one text per line; ` ||| ` separates a pair.
    output_file: the JSON-lines output, written atomically (a temporary file, then renamed).
    init_checkpoint: a converted folder, an original TF1 `bert_model.ckpt` prefix or folder, or
      a Hugging Face folder (see `official_bert.checkpoints.load_encoder`).
    vocab_file: the WordPiece vocabulary; by default the `vocab.txt` beside the checkpoint.
    bert_config_file: the `bert_config.json`; by default the one beside the checkpoint.
    layers: the layers whose per-token values are written (`"-1,-2,-3,-4"`: the last four).
    do_lower_case: lower-case the text (uncased models); checked against the checkpoint.
    max_seq_length: longest packed sequence; longer texts are truncated (and counted).
    batch_size: texts per encoder call.
    pooling: None for per-token features, or `cls` / `mean` for one vector per line.
    pooling_layer: the layer that `pooling` reads (-1: the last).
    normalize: L2-normalise the pooled vectors.
    export_dir: optional new (or empty) folder for a SavedModel of the encoder: raw text or
      token ids in, `sequence_output`, `pooled_output` and `encoder_outputs` out, like TF Hub's
      BERT encoders (see `official_bert.export.export_encoder`).

  Returns:
    A dict with `examples`, `truncated`, `seconds` and `output_file`.
  """
  if pooling is not None and pooling not in POOLINGS:
    raise ValueError(f"pooling must be one of {POOLINGS} or None, got {pooling!r}")
  vocab_file = vocab_file or _default_vocab(init_checkpoint)
  if vocab_file is None:
    raise ValueError(f"No vocab_file given and no {VOCAB_NAME} beside {init_checkpoint}")
  tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
  start = time.perf_counter()
  encoder = load_encoder(init_checkpoint, config=bert_config_file)
  config = encoder.config
  if max_seq_length > config.max_position_embeddings:
    raise ValueError(f"max_seq_length={max_seq_length} exceeds the model's "
                     f"max_position_embeddings={config.max_position_embeddings}")
  layer_indexes = parse_layers([pooling_layer] if pooling else layers, config.num_hidden_layers)
  tokenizer = tokenization.model_tokenizer(vocab_file, do_lower_case, config.vocab_size)
  if export_dir:
    # Before the extraction, so that a taken export_dir stops the run before the long part.
    export.export_encoder(encoder, export_dir, vocab_file=vocab_file, do_lower_case=do_lower_case,
                          max_seq_length=max_seq_length)
  examples = read_examples(input_file)
  features = convert_examples_to_features(examples, tokenizer, max_seq_length)

  @tf.function(reduce_retracing=True)
  def run(inputs):
    layer_outputs = encoder(inputs, training=False)["encoder_outputs"]
    selected = [tf.cast(layer_outputs[i], tf.float32) for i in layer_indexes]
    if pooling:
      return [pool(selected[0], inputs["input_mask"], pooling, normalize)]
    return selected

  def lines():
    begin = 0
    for batch_number, inputs in enumerate(make_dataset(features, batch_size), start=1):
      outputs = [output.numpy() for output in run(inputs)]
      end = begin + len(outputs[0])
      ids = [example.unique_id for example in examples[begin:end]]
      if pooling:
        for unique_id, vector in zip(ids, outputs[0]):
          yield json.dumps({"linex_index": unique_id, "embedding": _rounded(vector)}) + "\n"
      else:
        yield from _token_lines(features.tokens[begin:end], ids, outputs, layer_indexes)
      if batch_number % _LOG_EVERY_BATCHES == 0:
        logging.info("Encoded %d of %d lines.", end, len(examples))
      begin = end

  _write_atomically(output_file, lines())
  seconds = time.perf_counter() - start
  logging.info("Wrote %s for %d lines (%d truncated) to %s in %.1f s.",
               f"{pooling} embeddings" if pooling else f"layers {layer_indexes}", len(examples),
               features.num_truncated, output_file, seconds)
  return {"examples": len(examples), "truncated": features.num_truncated, "seconds": seconds,
          "output_file": output_file}
