"""SavedModels for TF Serving, one function per task model, written by `keras.export.ExportArchive`.

Every export is self-contained (the vocabulary is in `assets/`, the WordPiece model a graph
constant) and needs only TensorFlow and tensorflow-text's ops to run: `import tensorflow_text`
before `tf.saved_model.load`; TF Serving builds include them. Its signatures, with B the batch,
S = `max_seq_length`, `seq` any length up to the config's `max_position_embeddings`:

Classifier (`export_classifier`); every signature gives the same outputs: float32 `logits`,
`probabilities` [B, classes], int32 `label_id` [B], string `label` [B] (the label name; the id as
text without labels), or for regression float32 `logits` [B, 1] and `score` [B].
  serving_default   `text` string [B], or `text_a`, `text_b` for a sentence-pair model
  serve_token_ids   `input_word_ids`, `input_mask`, `input_type_ids` int32 [B, seq]
  serve_examples    `examples` string [B]: serialized `tf.Example`s with the original int64
                    features `input_ids`, `input_mask`, `segment_ids` of length S

Span labeler (`export_span_labeler`, SQuAD):
  serving_default   `question`, `context` string [B] -> float32 `start_logits`, `end_logits`
                    [B, S]; string `answer_text`, int32 `answer_start`, `answer_end` (Unicode
                    characters of the context, end exclusive), float32 `answer_score` [B]
  serve_token_ids   the three int32 [B, seq] -> `start_logits`, `end_logits` [B, seq]

Encoder (`export_encoder`, like TF Hub's BERT encoders):
  serving_default   `text` string [B]              -> float32 `sequence_output` [B, S, H],
  serve_text_pair   `text_a`, `text_b` string [B]     `pooled_output` [B, H], `encoder_outputs`
                                                      [layers, B, S, H] (every layer, stacked),
                                                      int32 `input_mask` [B, S]
  serve_token_ids   the three int32 [B, seq]       -> the same but `input_mask`

Token classifier (`export_token_classifier`):
  serving_default   `text` string [B] -> string `tokens` [B, S] (the WordPieces, `[CLS]`, `[SEP]`,
                    `[PAD]`; "##" marks a word's continuation), int32 `input_mask` [B, S], float32
                    `logits`, `probabilities` [B, S, tags], int32 `label_id`, string `label` [B, S]
  serve_token_ids   the three int32 [B, seq] -> `logits`, `probabilities`, `label_id`, `label`

Multiple choice (`export_multiple_choice`, SWAG):
  serving_default   `context` string [B], `endings` string [B, choices] -> float32 `logits`,
                    `probabilities` [B, choices], int32 `choice` [B]. For SWAG, each ending is
                    `sent2 + " " + ending_i`, joined by the client.
  serve_token_ids   the three int32 [B, choices, seq] -> the same

Raw text longer than S is truncated as in training (longest segment first); a SQuAD context keeps
its first window only.

Buckets: the model runs a raw-text (or `serve_examples`) batch at the smallest of the export's
`buckets` (default 16, 32, 64, ... below S, then S) that holds the batch's longest sequence, so
short requests cost less and an XLA-compiled model compiles once per bucket and batch size. The
outputs keep the shapes above: positions past the bucket are zero (`logits` 0, so the token
classifier's `probabilities` are uniform there), as they are past `input_mask`, which clients
already ignore; every position up to the bucket, and every output without a sequence axis, is
what the model gives at length S. `serve_token_ids` runs at the length the client sends.

XLA: with `jit_compile=True` the model part of every signature is a `tf.function` compiled with
XLA (tensorflow-text's ops have no XLA kernels, so the tokenizer stays outside); the SavedModel
keeps that attribute, and `tf.saved_model.load` and TF Serving compile it on the first call of
each input shape (batch size and bucket): a server that batches requests to a few allowed batch
sizes compiles a few times.

Precision: `dtype="bfloat16"` writes a SavedModel whose weights are stored in bfloat16 and whose
encoder computes in bfloat16 (layer norms and softmax with float32 statistics), with the same
signatures and float32 outputs; `jit_compile` then defaults to off, as XLA's CPU backend cannot
use the AMX units that make bfloat16 fast (`official_bert/export/precision.py`).
"""

import os

from absl import logging
import keras
import tensorflow as tf

from official_bert import checkpoints, tokenization
from official_bert.export import archive as archive_lib
from official_bert.export import precision, signatures, span_answers
from official_bert.models import (
  BertClassifier,
  BertMultipleChoice,
  BertPretrainer,
  BertSpanLabeler,
  BertTokenClassifier,
)
from official_bert.networks import BertEncoder

DEFAULT_MAX_SEQ_LENGTH = 128
DEFAULT_MAX_QUERY_LENGTH = 64
DEFAULT_MAX_ANSWER_LENGTH = 30


def _text_packer(model, vocab_file, do_lower_case, max_seq_length, buckets):
  limit = model.config.max_position_embeddings
  if not 3 <= max_seq_length <= limit:
    raise ValueError(f"max_seq_length must be between 3 and the model's max_position_embeddings "
                     f"({limit}), got {max_seq_length}.")
  packer = signatures.TextPacker(vocab_file, do_lower_case, max_seq_length, buckets)
  if packer.tokenizer.vocab_size > model.config.vocab_size:
    raise ValueError(f"{vocab_file} has {packer.tokenizer.vocab_size} tokens, more than the "
                     f"model's vocab_size {model.config.vocab_size}: not this model's vocabulary.")
  return packer


def _serving_model(model, dtype, jit_compile):
  """`model` in the serving `dtype`, and whether to compile it with XLA (None: per dtype).

  The served model is built on the kernels that the engine's one decision
  (`training.accelerators.choose`) picks for a CPU server in that dtype (a copy when the model
  was built on others): without XLA, the `cpu_onednn` products that the graph optimizer fuses
  with their bias and activation, and its one-pass layer norms.
  """
  choice = precision.serving_choice(precision.compute_dtype(model, dtype), jit_compile)
  model = precision.with_dtype(model, dtype, kernels=choice.kernels)
  logging.info("The SavedModel computes in %s: %s.", precision.compute_dtype(model),
               choice.reason)
  return model, choice.enable_xla


def _new_archive(text_packer):
  # The endpoints find the model's variables themselves; tracking the whole model as well would
  # only make `write_out` walk (and trace) every layer once more.
  archive = keras.export.ExportArchive()
  text_packer.track(archive)
  return archive


def export_classifier(model, export_dir, *, vocab_file, do_lower_case, max_seq_length,
                      labels=None, sentence_pair=False, is_regression=None, overwrite=False,
                      buckets=None, dtype=None, jit_compile=None):
  """Exports a `BertClassifier` (see the module docstring for its signatures).

  Args:
    model: the trained `BertClassifier`.
    export_dir: the SavedModel folder to write.
    vocab_file: the model's `vocab.txt`.
    do_lower_case: whether the model is uncased.
    max_seq_length: length of the packed raw-text inputs and of `serve_examples` features.
    labels: optional label names by class id (the `label` output).
    sentence_pair: raw text comes as `text_a`, `text_b` (MRPC, MNLI, ...) instead of `text`.
    is_regression: the model scores a number (`score`) rather than classes; by default, whether
      it has one output.
    overwrite: replace a non-empty `export_dir`.
    buckets: the lengths a raw-text batch is padded to, the smallest that holds its longest
      sequence (`signatures.bucket_lengths`; None: 16, 32, 64, ... below `max_seq_length`, then
      it; `()`: always `max_seq_length`).
    dtype: `float32` or `bfloat16`, the dtype the SavedModel stores its weights in and computes
      in (`precision.with_dtype`); None for the model as it is.
    jit_compile: compile the model (not the tokenizer) with XLA in the SavedModel; None for the
      dtype's default (`precision.default_jit_compile`: on for float32, off for bfloat16).

  Returns:
    `export_dir`.

  Example:

    export_classifier(model, "/tmp/sst2_savedmodel", vocab_file="vocab.txt",
                      do_lower_case=True, max_seq_length=128, labels=["0", "1"])
    served = tf.saved_model.load("/tmp/sst2_savedmodel")   # after `import tensorflow_text`
    served.signatures["serving_default"](text=tf.constant(["a gripping film"]))["label"]
  """
  archive_lib.check_export_dir(export_dir, overwrite)
  model, jit_compile = _serving_model(model, dtype, jit_compile)
  regression = model.num_classes == 1 if is_regression is None else is_regression
  if regression and model.num_classes != 1:
    raise ValueError(f"A regression model has one output, not {model.num_classes}.")
  if not regression and model.num_classes < 2:
    raise ValueError("A classifier needs num_classes >= 2; a one-output model is exported for "
                     "regression (is_regression=True).")
  if labels is not None and len(labels) != model.num_classes:
    raise ValueError(f"{len(labels)} labels given for a model with {model.num_classes} classes.")
  text_packer = _text_packer(model, vocab_file, do_lower_case, max_seq_length, buckets)

  call = signatures.compiled(model, jit_compile)

  def outputs(inputs):
    logits = call(inputs)["logits"]
    if regression:
      return signatures.regression_outputs(logits)
    return signatures.class_outputs(logits, labels)

  archive = _new_archive(text_packer)
  if sentence_pair:
    signatures.add_endpoint(archive, "serving_default",
                            lambda text_a, text_b: outputs(text_packer.trim(
                                text_packer(text_a, text_b))),
                            signatures.string_specs("text_a", "text_b"))
  else:
    signatures.add_endpoint(archive, "serving_default",
                            lambda text: outputs(text_packer.trim(text_packer(text))),
                            signatures.string_specs("text"))
  signatures.add_endpoint(archive, "serve_token_ids",
                          signatures.on_token_ids(outputs, model.config, max_seq_length),
                          signatures.token_id_specs())
  signatures.add_endpoint(
      archive, "serve_examples",
      lambda examples: outputs(text_packer.trim(
          signatures.parse_examples(examples, max_seq_length, model.config))),
      signatures.string_specs("examples"))
  return archive_lib.write_archive(archive, export_dir, overwrite)


def export_span_labeler(model, export_dir, *, vocab_file, do_lower_case, max_seq_length,
                        max_query_length=DEFAULT_MAX_QUERY_LENGTH,
                        max_answer_length=DEFAULT_MAX_ANSWER_LENGTH, overwrite=False,
                        buckets=None, dtype=None, jit_compile=None):
  """Exports a `BertSpanLabeler` that answers (question, context) in-graph.

  Args:
    model: the trained `BertSpanLabeler`.
    export_dir: the SavedModel folder to write.
    vocab_file: the model's `vocab.txt`.
    do_lower_case: whether the model is uncased.
    max_seq_length: length of the packed question and context.
    max_query_length: questions are cut to this many WordPieces (`run_squad.py`'s flag).
    max_answer_length: longest answer in WordPieces (`run_squad.py`'s flag).
    overwrite: replace a non-empty `export_dir`.
    buckets: the lengths a raw-text batch is padded to, the smallest that holds its longest
      sequence (`signatures.bucket_lengths`; None: 16, 32, 64, ... below `max_seq_length`, then
      it; `()`: always `max_seq_length`).
    dtype: `float32` or `bfloat16`, the dtype the SavedModel stores its weights in and computes
      in (`precision.with_dtype`); None for the model as it is.
    jit_compile: compile the model (not the tokenizer) with XLA in the SavedModel; None for the
      dtype's default (`precision.default_jit_compile`: on for float32, off for bfloat16).

  Returns:
    `export_dir`.
  """
  archive_lib.check_export_dir(export_dir, overwrite)
  model, jit_compile = _serving_model(model, dtype, jit_compile)
  if max_query_length + 3 >= max_seq_length:
    raise ValueError(f"max_seq_length {max_seq_length} leaves no room for the context after a "
                     f"{max_query_length}-piece question; raise it above max_query_length + 3.")
  text_packer = _text_packer(model, vocab_file, do_lower_case, max_seq_length, buckets)
  squad_inputs = span_answers.SquadInputs(text_packer, max_query_length)

  call = signatures.compiled(model, jit_compile)

  def logits(inputs):
    outputs = call(inputs)
    return {name: tf.cast(outputs[name], tf.float32) for name in ("start_logits", "end_logits")}

  def answer(question, context):
    inputs, layout = squad_inputs(question, context)
    outputs = logits(text_packer.trim(inputs))
    answers = span_answers.best_answer(context, outputs["start_logits"], outputs["end_logits"],
                                       layout, max_answer_length)
    return {**{name: signatures.pad_sequence(value, max_seq_length)
               for name, value in outputs.items()}, **answers}

  archive = _new_archive(text_packer)
  signatures.add_endpoint(archive, "serving_default", answer,
                          signatures.string_specs("question", "context"))
  signatures.add_endpoint(archive, "serve_token_ids",
                          signatures.on_token_ids(logits, model.config, max_seq_length),
                          signatures.token_id_specs())
  return archive_lib.write_archive(archive, export_dir, overwrite)


def export_encoder(model, export_dir, *, vocab_file, do_lower_case, max_seq_length,
                   overwrite=False, buckets=None, dtype=None, jit_compile=None):
  """Exports a `BertEncoder` (or a task model's `.encoder`) as a text embedding model.

  Args:
    model: a `BertEncoder`, or a model whose `.encoder` (a `BertEncoder`) is exported.
    export_dir: the SavedModel folder to write.
    vocab_file: the model's `vocab.txt`.
    do_lower_case: whether the model is uncased.
    max_seq_length: length of the packed raw-text inputs.
    overwrite: replace a non-empty `export_dir`.
    buckets: the lengths a raw-text batch is padded to, the smallest that holds its longest
      sequence (`signatures.bucket_lengths`; None: 16, 32, 64, ... below `max_seq_length`, then
      it; `()`: always `max_seq_length`).
    dtype: `float32` or `bfloat16`, the dtype the SavedModel stores its weights in and computes
      in (`precision.with_dtype`); None for the model as it is.
    jit_compile: compile the model (not the tokenizer) with XLA in the SavedModel; None for the
      dtype's default (`precision.default_jit_compile`: on for float32, off for bfloat16).

  Returns:
    `export_dir`.
  """
  archive_lib.check_export_dir(export_dir, overwrite)
  model, jit_compile = _serving_model(model, dtype, jit_compile)
  encoder = model if isinstance(model, BertEncoder) else model.encoder
  text_packer = _text_packer(encoder, vocab_file, do_lower_case, max_seq_length, buckets)

  call = signatures.compiled(encoder, jit_compile)

  def outputs(inputs):
    return signatures.encoder_outputs(call(inputs))

  def text_outputs(*texts):
    inputs = text_packer(*texts)
    trimmed = outputs(text_packer.trim(inputs))
    return {"sequence_output": signatures.pad_sequence(trimmed["sequence_output"], max_seq_length),
            "pooled_output": trimmed["pooled_output"],
            "encoder_outputs": signatures.pad_sequence(trimmed["encoder_outputs"], max_seq_length,
                                                       axis=2),
            "input_mask": inputs["input_mask"]}

  archive = _new_archive(text_packer)
  signatures.add_endpoint(archive, "serving_default", lambda text: text_outputs(text),
                          signatures.string_specs("text"))
  signatures.add_endpoint(archive, "serve_text_pair",
                          lambda text_a, text_b: text_outputs(text_a, text_b),
                          signatures.string_specs("text_a", "text_b"))
  signatures.add_endpoint(archive, "serve_token_ids",
                          signatures.on_token_ids(outputs, encoder.config, max_seq_length),
                          signatures.token_id_specs())
  return archive_lib.write_archive(archive, export_dir, overwrite)


def export_token_classifier(model, export_dir, *, vocab_file, do_lower_case, max_seq_length,
                            labels=None, overwrite=False, buckets=None,
                            dtype=None, jit_compile=None):
  """Exports a `BertTokenClassifier` that tags the WordPieces of raw text.

  Args:
    model: the trained `BertTokenClassifier`.
    export_dir: the SavedModel folder to write.
    vocab_file: the model's `vocab.txt`.
    do_lower_case: whether the model is uncased.
    max_seq_length: length of the packed raw-text inputs.
    labels: optional tag names by id (the `label` output).
    overwrite: replace a non-empty `export_dir`.
    buckets: the lengths a raw-text batch is padded to, the smallest that holds its longest
      sequence (`signatures.bucket_lengths`; None: 16, 32, 64, ... below `max_seq_length`, then
      it; `()`: always `max_seq_length`).
    dtype: `float32` or `bfloat16`, the dtype the SavedModel stores its weights in and computes
      in (`precision.with_dtype`); None for the model as it is.
    jit_compile: compile the model (not the tokenizer) with XLA in the SavedModel; None for the
      dtype's default (`precision.default_jit_compile`: on for float32, off for bfloat16).

  Returns:
    `export_dir`.
  """
  archive_lib.check_export_dir(export_dir, overwrite)
  model, jit_compile = _serving_model(model, dtype, jit_compile)
  if labels is not None and len(labels) != model.num_classes:
    raise ValueError(f"{len(labels)} labels given for a model with {model.num_classes} tags.")
  text_packer = _text_packer(model, vocab_file, do_lower_case, max_seq_length, buckets)

  call = signatures.compiled(model, jit_compile)

  def outputs(inputs, seq_length=None):
    logits = call(inputs)["logits"]
    if seq_length is not None:
      logits = signatures.pad_sequence(logits, seq_length)
    return signatures.class_outputs(logits, labels)

  def tag_text(text):
    inputs = text_packer(text)
    tokens = text_packer.tokenizer.ids_to_tokens(inputs["input_word_ids"])
    return {**outputs(text_packer.trim(inputs), max_seq_length), "tokens": tokens,
            "input_mask": inputs["input_mask"]}

  archive = _new_archive(text_packer)
  signatures.add_endpoint(archive, "serving_default", tag_text, signatures.string_specs("text"))
  signatures.add_endpoint(archive, "serve_token_ids",
                          signatures.on_token_ids(outputs, model.config, max_seq_length),
                          signatures.token_id_specs())
  return archive_lib.write_archive(archive, export_dir, overwrite)


def export_multiple_choice(model, export_dir, *, vocab_file, do_lower_case, max_seq_length,
                           overwrite=False, buckets=None, dtype=None, jit_compile=None):
  """Exports a `BertMultipleChoice` that scores the endings of a context.

  Args:
    model: the trained `BertMultipleChoice`.
    export_dir: the SavedModel folder to write.
    vocab_file: the model's `vocab.txt`.
    do_lower_case: whether the model is uncased.
    max_seq_length: length of each packed (context, ending) pair.
    overwrite: replace a non-empty `export_dir`.
    buckets: the lengths a raw-text batch is padded to, the smallest that holds its longest
      sequence (`signatures.bucket_lengths`; None: 16, 32, 64, ... below `max_seq_length`, then
      it; `()`: always `max_seq_length`).
    dtype: `float32` or `bfloat16`, the dtype the SavedModel stores its weights in and computes
      in (`precision.with_dtype`); None for the model as it is.
    jit_compile: compile the model (not the tokenizer) with XLA in the SavedModel; None for the
      dtype's default (`precision.default_jit_compile`: on for float32, off for bfloat16).

  Returns:
    `export_dir`.
  """
  archive_lib.check_export_dir(export_dir, overwrite)
  model, jit_compile = _serving_model(model, dtype, jit_compile)
  num_choices = model.num_choices
  text_packer = _text_packer(model, vocab_file, do_lower_case, max_seq_length, buckets)

  call = signatures.compiled(model, jit_compile)

  def outputs(inputs):
    logits = tf.cast(call(inputs)["logits"], tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
            "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def choose(context, endings):
    # Each context once through the tokenizer, then repeated for its endings.
    context_ids = text_packer.tokenizer(context)
    repeated = tf.gather(context_ids, tf.repeat(tf.range(tf.shape(context)[0]), num_choices))
    pairs = text_packer.trim(
        text_packer(repeated, text_packer.tokenizer(tf.reshape(endings, [-1]))))
    return outputs({name: tf.reshape(tensor, [-1, num_choices, tf.shape(tensor)[-1]])
                    for name, tensor in pairs.items()})

  archive = _new_archive(text_packer)
  signatures.add_endpoint(archive, "serving_default", choose,
                          [tf.TensorSpec([None], tf.string, name="context"),
                           tf.TensorSpec([None, num_choices], tf.string, name="endings")])
  signatures.add_endpoint(archive, "serve_token_ids",
                          signatures.on_token_ids(outputs, model.config, max_seq_length),
                          signatures.token_id_specs((None, num_choices, None)))
  return archive_lib.write_archive(archive, export_dir, overwrite)


# The signatures of each kind: `export(model, info, **common)`, keyed by the kinds that the model
# classes declare.
_EXPORTS = {
    BertClassifier.kind: lambda model, info, **common: export_classifier(
        model, labels=info.labels, sentence_pair=bool(info.extra.get("sentence_pair", False)),
        is_regression=info.is_regression, **common),
    BertSpanLabeler.kind: lambda model, info, **common: export_span_labeler(
        model, max_query_length=info.extra.get("max_query_length", DEFAULT_MAX_QUERY_LENGTH),
        max_answer_length=info.extra.get("max_answer_length", DEFAULT_MAX_ANSWER_LENGTH),
        **common),
    BertTokenClassifier.kind: lambda model, info, **common: export_token_classifier(
        model, labels=info.labels, **common),
    BertMultipleChoice.kind: lambda model, info, **common: export_multiple_choice(model, **common),
    BertEncoder.kind: lambda model, info, **common: export_encoder(model, **common),
    BertPretrainer.kind: lambda model, info, **common: export_encoder(model, **common),
}


def export_task_model(model, info, export_dir, *, max_seq_length=None, do_lower_case=None,
                      overwrite=False, buckets=None, dtype=None, jit_compile=None):
  """Exports a model with the signatures of its kind.

  Args:
    model: the model `checkpoints.load_model` returned (or the in-memory one that was saved).
    info: its `checkpoints.ModelInfo` (`checkpoints.model_info(model, ...)` for one in memory).
    export_dir: the SavedModel folder to write.
    max_seq_length: overrides `info.max_seq_length` (default 128 when neither is set).
    do_lower_case: overrides `info.do_lower_case`; required when that is unknown.
    overwrite: replace a non-empty `export_dir`.
    buckets: the raw-text sequence lengths (see `export_classifier`).
    dtype: `float32` or `bfloat16` (see `export_classifier`); None for the model as it is.
    jit_compile: compile the model with XLA (see `export_classifier`); None: per dtype.

  Returns:
    `export_dir`.
  """
  if info.kind not in _EXPORTS:
    raise ValueError(f"No SavedModel signatures for models of kind {info.kind!r}; the kinds "
                     f"exported are {', '.join(sorted(_EXPORTS))}.")
  if info.vocab_file is None:
    raise FileNotFoundError(f"The {info.kind} model has no {checkpoints.VOCAB_NAME}: its folder "
                            "needs the vocabulary it was trained with.")
  max_seq_length = max_seq_length or info.max_seq_length or DEFAULT_MAX_SEQ_LENGTH
  if do_lower_case is None:
    do_lower_case = info.do_lower_case
  if do_lower_case is None:
    raise ValueError(f"Whether {info.vocab_file}'s model is cased is unknown: pass "
                     "do_lower_case (--do_lower_case).")
  logging.info("Exporting the %s model to %s (max_seq_length %d, do_lower_case %s).",
               info.kind, export_dir, max_seq_length, do_lower_case)
  return _EXPORTS[info.kind](model, info, export_dir=export_dir, vocab_file=info.vocab_file,
                             do_lower_case=do_lower_case, max_seq_length=max_seq_length,
                             overwrite=overwrite, buckets=buckets, dtype=dtype,
                             jit_compile=jit_compile)


def export_model_dir(model_dir, export_dir, *, max_seq_length=None, do_lower_case=None,
                     overwrite=False, buckets=None, dtype=None, jit_compile=None):
  """Exports the model of a model folder (or a pre-trained checkpoint): `export_saved_model.py`.

  Args:
    model_dir: a model folder (`checkpoints.save_model_dir`), or an original TF1 or Hugging Face
      folder with its `vocab.txt` (exported as an encoder).
    export_dir: the SavedModel folder to write.
    max_seq_length: overrides the folder's `max_seq_length` (default 128 when it has none).
    do_lower_case: overrides the folder's `do_lower_case`; required for a folder that does not
      record it.
    overwrite: replace a non-empty `export_dir`.
    buckets: the raw-text sequence lengths (see `export_classifier`).
    dtype: `float32` or `bfloat16` (see `export_classifier`); None for the model as it is.
    jit_compile: compile the model with XLA (see `export_classifier`); None: per dtype.

  Returns:
    `export_dir`.

  Example:

    export_model_dir("/tmp/mrpc_output", "/tmp/mrpc_savedmodel")
  """
  archive_lib.check_export_dir(export_dir, overwrite)
  # Read in float32 for a new dtype: `with_dtype` casts the weights once they are loaded.
  model, info = checkpoints.load_model(model_dir, dtype="float32" if dtype else None)
  if do_lower_case is None:
    do_lower_case = info.do_lower_case
  if do_lower_case is not None:
    tokenization.validate_case_matches_checkpoint(do_lower_case, os.fspath(model_dir))
  return export_task_model(model, info, export_dir, max_seq_length=max_seq_length,
                           do_lower_case=do_lower_case, overwrite=overwrite, buckets=buckets,
                           dtype=dtype, jit_compile=jit_compile)
