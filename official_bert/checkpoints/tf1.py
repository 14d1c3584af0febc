"""The original BERT checkpoint format: TF1 `bert_model.ckpt` with Google's variable names.

Every released BERT (Base, Large, the small BERTs, multilingual, Chinese) and every checkpoint that
the original `run_pretraining.py`, `run_classifier.py` or `run_squad.py` wrote is a TF1 name-based
checkpoint: `bert_model.ckpt.index` plus `bert_model.ckpt.data-00000-of-00001` (or
`model.ckpt-<step>.*` in an output folder), with variables such as
`bert/encoder/layer_3/attention/self/query/kernel`. This module maps those names onto the layers of
a `BertEncoder`, a `BertPretrainer` and the task models whose heads the original scripts have,
reads them into a model and writes a model back under the same names, shapes and dtypes, so the
original code can read what this package trains.

The heads, by model kind (`official_bert.common.registry`): `pretrainer` has
`cls/predictions/...` and
`cls/seq_relationship/...`; `classifier` has `run_classifier.py`'s top-level `output_weights`
(`[num_labels, hidden]`) and `output_bias`; `span_labeler` has `run_squad.py`'s
`cls/squad/output_weights` (`[2, hidden]`: start, end) and `cls/squad/output_bias`. The other kinds
(and task models with a custom head) map onto the encoder's variables only.

The model keeps the query, key and value projections of each layer in one fused `qkv` Dense layer;
the three original variables are its column blocks in that order. Two kernels are stored transposed:
the feed-forward output projection (`TransposedDense`, `[hidden, intermediate]`) and the
next-sentence head's (`cls/seq_relationship/output_weights` is `[2, hidden]`); the original
variables keep their shapes. The masked-LM output projection is the word-embedding table, so it
has no variable of its own.
"""

import dataclasses
import os

from absl import logging
import keras
import numpy as np
import tensorflow as tf

from official_bert.common import file_io
from official_bert.common.errors import UserError
from official_bert.layers.classification_head import ClassificationHead, SpanHead
from official_bert.models.bert_classifier import BertClassifier
from official_bert.models.bert_pretrainer import BertPretrainer
from official_bert.models.bert_span_labeler import BertSpanLabeler
from official_bert.networks.bert_encoder import BertEncoder

CHECKPOINT_NAME = "bert_model.ckpt"
ENCODER_SCOPE = "bert/"
# Optimizer slots and counters that training writes beside the weights. They are not part of the
# model and are skipped on reading (and counted in the log).
_BOOKKEEPING_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/Momentum", "/LAMB", "/LAMB_1",
                         "/ExponentialMovingAverage")
_BOOKKEEPING_NAMES = frozenset({"global_step", "beta1_power", "beta2_power", "good_steps",
                                "current_loss_scale", "_CHECKPOINTABLE_OBJECT_GRAPH"})
_LISTED = 20


@dataclasses.dataclass(frozen=True)
class _Entry:
  """One model variable and the original variable(s) it holds.

  Several names mean the variable is their concatenation along the last axis (the fused `qkv`
  projection); `transposed` means each original variable is stored as the transpose.
  """

  variable: keras.Variable
  names: tuple
  transposed: bool = False

  def original_shapes(self):
    shape = tuple(self.variable.shape)
    part = shape[:-1] + (shape[-1] // len(self.names),)
    return {name: part[::-1] if self.transposed else part for name in self.names}

  def original_values(self):
    parts = np.split(keras.ops.convert_to_numpy(self.variable), len(self.names), axis=-1)
    return {name: np.ascontiguousarray(part.T if self.transposed else part)
            for name, part in zip(self.names, parts)}

  def for_slot(self, slot, suffix):
    """The same mapping for an optimizer slot of the variable, under `<name><suffix>`."""
    return _Entry(slot, tuple(name + suffix for name in self.names), self.transposed)

  def assign(self, weights):
    parts = [weights[name].T if self.transposed else weights[name] for name in self.names]
    value = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)
    self.variable.assign(np.asarray(value, dtype=self.variable.dtype))


def _dense(layer, scope, transposed=False):
  return [_Entry(layer.kernel, (f"{scope}/kernel",), transposed),
          _Entry(layer.bias, (f"{scope}/bias",))]


def _layer_norm(layer, scope):
  return [_Entry(layer.gamma, (f"{scope}/gamma",)), _Entry(layer.beta, (f"{scope}/beta",))]


def _encoder_entries(encoder):
  embeddings = encoder.embeddings
  entries = [
      _Entry(embeddings.word_embeddings.embeddings, ("bert/embeddings/word_embeddings",)),
      _Entry(embeddings.position_embeddings.embeddings, ("bert/embeddings/position_embeddings",)),
      _Entry(embeddings.token_type_embeddings.embeddings,
             ("bert/embeddings/token_type_embeddings",)),
      *_layer_norm(embeddings.layer_norm, "bert/embeddings/LayerNorm"),
  ]
  for index, block in enumerate(encoder.transformer_layers):
    scope = f"bert/encoder/layer_{index}"
    projections = [f"{scope}/attention/self/{part}" for part in ("query", "key", "value")]
    entries += [
        _Entry(block.attention.qkv.kernel, tuple(f"{name}/kernel" for name in projections)),
        _Entry(block.attention.qkv.bias, tuple(f"{name}/bias" for name in projections)),
        *_dense(block.attention.output_dense, f"{scope}/attention/output/dense"),
        *_layer_norm(block.attention_layer_norm, f"{scope}/attention/output/LayerNorm"),
        *_dense(block.intermediate, f"{scope}/intermediate/dense"),
        *_dense(block.output_dense, f"{scope}/output/dense", transposed=True),
        *_layer_norm(block.output_layer_norm, f"{scope}/output/LayerNorm"),
    ]
  return entries + _dense(encoder.pooler, "bert/pooler/dense")


def _output_layer(dense, scope):
  """An original output layer: `output_weights` `[classes, hidden]` (the transposed kernel) and
  `output_bias`, under `scope` (`""` for the top level)."""
  return [_Entry(dense.kernel, (f"{scope}output_weights",), transposed=True),
          _Entry(dense.bias, (f"{scope}output_bias",))]


def _pretraining_heads(pretrainer):
  masked_lm = pretrainer.masked_lm
  if masked_lm.embedding is not pretrainer.encoder.word_embeddings:
    raise ValueError("The masked-LM head's output projection is not tied to the encoder's word "
                     "embeddings; the original checkpoint format has no variable for it.")
  return [
      *_dense(masked_lm.transform, "cls/predictions/transform/dense"),
      *_layer_norm(masked_lm.layer_norm, "cls/predictions/transform/LayerNorm"),
      _Entry(masked_lm.output_bias, ("cls/predictions/output_bias",)),
      *_output_layer(pretrainer.next_sentence.dense, "cls/seq_relationship/"),
  ]


# The fine-tuning heads of the original scripts, by model kind: the model's head attribute, the
# stock head class whose dense layer is the original output layer, and the original scope.
_TASK_HEADS = {
    BertClassifier.kind: ("classifier", ClassificationHead, ""),  # run_classifier.py
    BertSpanLabeler.kind: ("span_head", SpanHead, "cls/squad/"),  # run_squad.py
}


def _head_entries(model):
  """The model's head variables under their original names; [] when the original has none."""
  if isinstance(model, BertPretrainer):
    return _pretraining_heads(model)
  spec = _TASK_HEADS.get(getattr(type(model), "kind", None))
  if spec is None or not isinstance(getattr(model, "encoder", None), BertEncoder):
    return []
  attribute, head_class, scope = spec
  head = getattr(model, attribute)
  return _output_layer(head.dense, scope) if type(head) is head_class else []


def _entries(model):
  """Returns `(entries, claims)`: the model's variables and `claims(name)`, whether a checkpoint
  variable of that name belongs to the model (the others are ignored on reading)."""
  if isinstance(model, BertPretrainer):
    return _encoder_entries(model.encoder) + _head_entries(model), lambda name: True
  if isinstance(model, BertEncoder):
    encoder, heads = model, []
  elif isinstance(getattr(model, "encoder", None), BertEncoder):
    encoder, heads = model.encoder, _head_entries(model)
  else:
    raise TypeError(f"Expected a BertEncoder, a BertPretrainer or a task model with a "
                    f"BertEncoder `.encoder`, got {type(model).__name__}.")
  names = {name for entry in heads for name in entry.names}
  return (_encoder_entries(encoder) + heads,
          lambda name: name.startswith(ENCODER_SCOPE) or name in names)


def original_entries(model):
  """The model's variables with their original names (see `original_variable_shapes`).

  Each entry has `variable`, `names` (several: their concatenation along the last axis),
  `transposed`, `original_shapes()`, `original_values()`, `assign(weights)` and
  `for_slot(slot, suffix)` (the same mapping for an optimizer slot, e.g. `/adam_m`).
  """
  return _entries(model)[0]


def head_names(model):
  """The original names of the model's task head; empty when the original has none for it."""
  return tuple(name for entry in _head_entries(model) for name in entry.names)


def names_whole_model(model):
  """Whether every variable of the model has an original name (no head is left out)."""
  if isinstance(model, (BertEncoder, BertPretrainer)):
    return True
  return isinstance(getattr(model, "encoder", None), BertEncoder) and bool(head_names(model))


def original_kind(names):
  """The model kind whose variables an original checkpoint holds, from its variable names.

  Args:
    names: the checkpoint's variable names (an iterable, or a dict keyed by name).

  Returns:
    `pretrainer` (masked-LM and next-sentence heads), `classifier` (`output_weights`),
    `span_labeler` (`cls/squad/output_weights`) or `encoder` (none of them).

  Raises:
    ValueError: the names hold the heads of several kinds.
  """
  names = set(names)
  kinds = [kind for kind, (_, _, scope) in _TASK_HEADS.items()
           if f"{scope}output_weights" in names]
  if has_pretraining_heads(names):
    kinds.append(BertPretrainer.kind)
  if len(kinds) > 1:
    raise ValueError(f"The checkpoint holds the heads of several models ({', '.join(kinds)}); "
                     "expected one of them.")
  return kinds[0] if kinds else BertEncoder.kind


def model_for_weights(config, weights):
  """Builds the model (fresh weights) that original weights belong to, as `original_kind` says.

  Args:
    config: the `BertConfig`.
    weights: `{original name: array}`; a classifier's number of classes is the first dimension
      of its `output_weights`.
  """
  kind = original_kind(weights)
  if kind == BertClassifier.kind:
    return BertClassifier(config, num_classes=int(np.shape(weights["output_weights"])[0]))
  return {BertPretrainer.kind: BertPretrainer, BertSpanLabeler.kind: BertSpanLabeler,
          BertEncoder.kind: BertEncoder}[kind](config)


def is_bookkeeping(name):
  """True for optimizer slots and step counters (`.../adam_m`, `global_step`, ...)."""
  return name in _BOOKKEEPING_NAMES or name.endswith(_BOOKKEEPING_SUFFIXES)


def has_pretraining_heads(names):
  """True when checkpoint variable names include the masked-LM or next-sentence head."""
  return any(name.startswith(("cls/predictions/", "cls/seq_relationship/")) for name in names)


def original_variable_shapes(model):
  """Returns `{original name: shape}` for every checkpoint variable the model holds.

  Args:
    model: a `BertEncoder` (the `bert/...` variables), a `BertPretrainer` (plus `cls/...`), or a
      task model with a `BertEncoder` `.encoder` (its variables, plus the head's where the
      original has one for the model's kind: see the module docstring).
  """
  entries, _ = _entries(model)
  return {name: shape for entry in entries for name, shape in entry.original_shapes().items()}


def get_original_weights(model):
  """Returns `{original name: numpy array}`: the model's weights under the original names."""
  entries, _ = _entries(model)
  return {name: value for entry in entries for name, value in entry.original_values().items()}


def _listing(names):
  shown = ", ".join(names[:_LISTED])
  return shown + (f", ... and {len(names) - _LISTED} more" if len(names) > _LISTED else "")


def check_compatible(model, shapes, source="the checkpoint"):
  """Checks that checkpoint variables fit the model one to one, or raises naming each misfit.

  Optimizer slots and `global_step` are ignored. A `BertEncoder` claims only the `bert/` scope,
  so the heads of a pre-training (or fine-tuning) checkpoint are ignored when loading an encoder;
  a task model claims `bert/` and its own head, which must then be there.

  Args:
    model: see `original_variable_shapes`.
    shapes: `{name: shape}` of the checkpoint's variables.
    source: what to call the checkpoint in the error message.

  Returns:
    The sorted names that were ignored (outside what the model claims).

  Raises:
    ValueError: listing the missing variables, the unexpected ones and the shape mismatches.
  """
  entries, claims = _entries(model)
  expected = {name: tuple(shape) for entry in entries
              for name, shape in entry.original_shapes().items()}
  found, ignored = {}, []
  for name, shape in shapes.items():
    if is_bookkeeping(name):
      continue
    if not claims(name):
      ignored.append(name)
    else:
      found[name] = tuple(shape)
  missing = sorted(set(expected) - set(found))
  unexpected = sorted(set(found) - set(expected))
  mismatched = [f"{name}: checkpoint {list(found[name])} vs model {list(expected[name])}"
                for name in sorted(set(found) & set(expected)) if found[name] != expected[name]]
  if missing or unexpected or mismatched:
    problems = [f"  missing ({len(missing)}): {_listing(missing)}" if missing else "",
                f"  unexpected ({len(unexpected)}): {_listing(unexpected)}" if unexpected else "",
                f"  shape mismatch ({len(mismatched)}): {_listing(mismatched)}"
                if mismatched else ""]
    config = getattr(model, "config", None)
    raise ValueError(
        f"{source} does not fit the {type(model).__name__} built from {config}:\n"
        + "\n".join(problem for problem in problems if problem)
        + "\nCheck that the bert_config.json belongs to this checkpoint, and load an encoder "
          "(not a pre-trainer or task model) from a checkpoint without their heads.")
  return sorted(ignored)


def set_original_weights(model, weights, source="the checkpoint"):
  """Assigns `{original name: array}` to the model after `check_compatible` accepts them.

  Args:
    model: see `original_variable_shapes`.
    weights: `{original name: numpy array}`; optimizer slots and names the model does not claim
      are ignored.
    source: what to call the weights in messages.
  """
  ignored = check_compatible(model, {name: np.shape(value) for name, value in weights.items()},
                             source)
  entries, _ = _entries(model)
  for entry in entries:
    entry.assign(weights)
  if ignored:
    logging.info("Ignored %d variables of %s that the %s does not hold: %s", len(ignored),
                 source, type(model).__name__, _listing(ignored))
  logging.info("Loaded %d variables from %s into the %s.",
               sum(len(entry.names) for entry in entries), source, type(model).__name__)


def set_head_weights(model, weights, source="the checkpoint"):
  """Assigns a task model's head from original weights that hold it with the model's shapes.

  For `--init_checkpoint`: a pre-trained checkpoint has no fine-tuning head, and a fine-tuned one
  for another number of labels has one of other shapes; either way the head keeps its fresh
  initialisation (logged). A head that is there only in part is an error.

  Args:
    model: a task model whose kind has an original head (`head_names(model)` is not empty).
    weights: `{original name: numpy array}`.
    source: what to call the weights in messages.

  Returns:
    True when the head was assigned.
  """
  entries = _head_entries(model)
  expected = {name: tuple(shape) for entry in entries
              for name, shape in entry.original_shapes().items()}
  present = sorted(name for name in expected if name in weights)
  kind = getattr(type(model), "kind", type(model).__name__)
  if not present:
    logging.info("The %s head (%s) starts freshly initialised: %s does not hold it.", kind,
                 ", ".join(expected), source)
    return False
  if len(present) < len(expected):
    raise ValueError(f"{source} holds the {kind} head only in part: it has {', '.join(present)} "
                     f"but not {', '.join(sorted(set(expected) - set(present)))}.")
  mismatched = [f"{name} {list(np.shape(weights[name]))} (the model's is {list(shape)})"
                for name, shape in expected.items() if tuple(np.shape(weights[name])) != shape]
  if mismatched:
    logging.warning("The %s head of %s has other shapes than the model's: %s. It was trained "
                    "for another number of labels, so the head starts freshly initialised.",
                    kind, source, "; ".join(mismatched))
    return False
  for entry in entries:
    entry.assign(weights)
  logging.info("Loaded the %s head (%s) from %s.", kind, ", ".join(expected), source)
  return True


def resolve_tf1_prefix(path):
  """Returns the checkpoint prefix that `path` names, or None when it names no TF1 checkpoint.

  Args:
    path: a prefix (`.../bert_model.ckpt`, `.../model.ckpt-1000`), or a directory holding
      `bert_model.ckpt.index` or a `checkpoint` state file (the newest checkpoint is taken).
  """
  path = os.fspath(path)
  # The prefix is tried first: on some file systems (`ram://`) every prefix of a file name is
  # also a folder.
  if file_io.is_file(path + ".index"):
    return path
  if tf.io.gfile.isdir(path):
    if file_io.is_file(os.path.join(path, CHECKPOINT_NAME + ".index")):
      return os.path.join(path, CHECKPOINT_NAME)
    return tf.train.latest_checkpoint(path)
  return None


def require_tf1_prefix(path):
  """Like `resolve_tf1_prefix`, but raises `FileNotFoundError` when there is no checkpoint."""
  prefix = resolve_tf1_prefix(path)
  if prefix is None:
    raise FileNotFoundError(f"No TF1 checkpoint at {path}: expected a prefix such as "
                            f".../{CHECKPOINT_NAME} (with {CHECKPOINT_NAME}.index beside it) or a "
                            f"directory holding {CHECKPOINT_NAME}.index.")
  return prefix


def _reader(prefix):
  # Opened from the prefix itself: `tf.train.load_checkpoint` would take a prefix for a folder
  # on file systems where every prefix of a file name is a folder (`ram://`).
  return tf.compat.v1.train.NewCheckpointReader(prefix)


def list_tf1_variables(path):
  """Returns `{name: shape}` of a TF1 checkpoint from its index alone (no data shard needed)."""
  shapes = _reader(require_tf1_prefix(path)).get_variable_to_shape_map()
  return {name: tuple(shapes[name]) for name in sorted(shapes)}


def read_tf1_checkpoint(path):
  """Reads a TF1 checkpoint's weights, skipping optimizer slots and `global_step`.

  Args:
    path: a checkpoint prefix or a directory (see `resolve_tf1_prefix`).

  Returns:
    `{name: numpy array}` in the checkpoint's own dtypes.
  """
  prefix = require_tf1_prefix(path)
  # The index lists the variables; their values are in the data shard(s) beside it.
  shards = tf.io.gfile.glob(f"{prefix}.data-*")
  if not shards:
    raise UserError(f"{prefix}.index has no data shard beside it ({prefix}.data-00000-of-NNNNN "
                    "is missing): copy the checkpoint's .data-* file(s) too.")
  reader = _reader(prefix)
  names = sorted(reader.get_variable_to_shape_map())
  try:
    weights = {name: reader.get_tensor(name) for name in names if not is_bookkeeping(name)}
  except (tf.errors.OpError, IndexError) as error:
    # A missing shard of several, or a truncated one (a bare IndexError).
    detail = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    raise UserError(f"{prefix}: the checkpoint's data cannot be read ({detail}); copy its "
                    ".index and all its .data-* files again.") from None
  logging.info("Read %d variables from %s (skipped %d optimizer slots and counters).",
               len(weights), prefix, len(names) - len(weights))
  return weights


def load_tf1_checkpoint(model, path):
  """Loads an original BERT checkpoint into a model, checking every name and shape.

  Args:
    model: a `BertEncoder` (reads `bert/...`, ignores the rest), a `BertPretrainer` (reads
      `bert/...` and `cls/...`, all of them required) or a task model with an `.encoder`.
    path: a checkpoint prefix or a directory (see `resolve_tf1_prefix`).

  Example:

  >>> import numpy as np
  >>> from official_bert import BertConfig, BertPretrainer
  >>> config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
  ...                     num_attention_heads=2, intermediate_size=32)
  >>> trained = BertPretrainer(config)
  >>> save_tf1_checkpoint(trained, "bert_mini/bert_model.ckpt")
  'bert_mini/bert_model.ckpt'
  >>> model = BertPretrainer(config)
  >>> load_tf1_checkpoint(model, "bert_mini/bert_model.ckpt")
  >>> all(np.array_equal(a, b) for a, b in zip(model.get_weights(), trained.get_weights()))
  True
  """
  prefix = require_tf1_prefix(path)
  set_original_weights(model, read_tf1_checkpoint(prefix), source=prefix)


def save_tf1_checkpoint(model, prefix):
  """Writes the model's weights as an original BERT checkpoint (`prefix.index` + `prefix.data-*`).

  The names, shapes and dtypes are the original ones, so `tf.train.load_checkpoint` and the
  original `modeling.py` read the result. Files are written into a temporary folder beside the
  target and moved into place, the index last (`file_io.write_folder`), so a reader never sees a
  partial checkpoint.

  Args:
    model: see `original_variable_shapes`.
    prefix: the checkpoint prefix, e.g. `out/bert_model.ckpt`.

  Returns:
    The prefix.
  """
  prefix = os.fspath(prefix)
  if not names_whole_model(model):
    logging.warning("The original format has no names for the head of the %s: %s holds its "
                    "encoder only.", type(model).__name__, prefix)
  weights = get_original_weights(model)
  folder, stem = os.path.dirname(prefix) or ".", os.path.basename(prefix)
  names = sorted(weights)

  def save(staging):
    tf.raw_ops.SaveV2(prefix=os.path.join(staging, stem), tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(weights[name]) for name in names])

  written = file_io.write_folder(folder, save, last=stem + ".index")
  # Data shards of an earlier checkpoint under this prefix would not match the new index.
  for name in tf.io.gfile.listdir(folder):
    if name.startswith(stem + ".data-") and name not in written:
      tf.io.gfile.remove(os.path.join(folder, name))
  logging.info("Wrote %d variables to %s.", len(names), prefix)
  return prefix
