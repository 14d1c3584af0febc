"""ONNX exports: the encoder inputs (token ids) in, the outputs of a kind's `serve_token_ids`.

ONNX has no WordPiece, so a client tokenizes with the package (`FullTokenizer` and the feature
converters, or `signatures.TextPacker` in-graph) and sends `input_word_ids`, `input_mask` and
`input_type_ids`, int32 `[batch, seq]` (`[batch, choices, seq]` for multiple choice), `seq` any
length up to the config's `max_position_embeddings`. ONNX Runtime runs the file:

    import onnxruntime
    session = onnxruntime.InferenceSession("/tmp/mrpc.onnx")
    logits, = session.run(["logits"], {"input_word_ids": ids, "input_mask": mask,
                                       "input_type_ids": type_ids})

The graph is converted by tf2onnx from the model on the stock kernels in float32
(`formats.portable_model`); the ids are not checked in the graph as a SavedModel checks them (an
id past the vocabulary fails in ONNX Runtime's gather).
"""

import contextlib
import gc
import json
import logging
import os
import tempfile
import threading

import numpy as np

from official_bert.export import formats

# ONNX Runtime 1.17 and later run every operator of this opset on CPU.
OPSET = 17


def _erfc_as_one_minus_erf(ctx, node, name, args):
  """tf2onnx handler of TensorFlow's `Erfc` (exact GELU's form in Keras), which ONNX lacks:
  `1 - Erf(x)`."""
  del name, args
  from tf2onnx import utils  # pylint: disable=import-outside-toplevel

  node.type = "Erf"
  one = ctx.make_const(utils.make_name(f"{node.name}_one"), np.ones([], np.float32))
  ctx.insert_new_node_on_output("Sub", node.output[0], name=utils.make_name(f"{node.name}_erfc"),
                                inputs=[one.output[0], node.output[0]])


def check_kind(kind):
  """Refuses a kind without a `serve_token_ids` signature (every model kind has one)."""
  if kind not in formats.TOKEN_ID_KINDS:
    raise formats.FormatError(f"--format=onnx has no signature for models of kind "
                              f"{kind!r}; the kinds are {', '.join(formats.TOKEN_ID_KINDS)}.")


def convert(model, info, *, max_seq_length, precision="float32"):
  """The `.onnx` bytes of a model's token-id signature, with this package's mark.

  Args:
    model: the model (any dtype and kernels: its portable copy is converted).
    info: its `checkpoints.ModelInfo`.
    max_seq_length: the length the model was trained at, recorded in the mark for clients.
    precision: `float32`, or `int8`: ONNX Runtime's BERT fusions, then its dynamic
      quantization (int8 weights of the matrix products, activations quantized per call), the
      fastest int8 measured (`benchmarks/serving_throughput.py --formats`).
  """
  tf2onnx = _import_tf2onnx()
  check_kind(info.kind)
  function = formats.token_id_function(model, info)
  # tf2onnx logs every rewrite at INFO.
  logging.getLogger("tf2onnx").setLevel(logging.WARNING)
  with _garbage_collected_between_optimizer_passes():
    proto, _ = tf2onnx.convert.from_function(
        function, input_signature=function.input_signature, opset=OPSET,
        custom_op_handlers={"Erfc": (_erfc_as_one_minus_erf, [])})
  if precision == "int8":
    proto = _int8(proto, model.config)
  mark = proto.metadata_props.add()
  mark.key = formats.MARK
  mark.value = json.dumps({"format": "official_bert ONNX", "kind": info.kind,
                           "max_seq_length": max_seq_length, "precision": precision})
  return proto.SerializeToString()


_TF_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"


def _import_tf2onnx():
  """tf2onnx, with its converter, imported without its change to the process environment.

  Importing `tf2onnx.convert` sets TF_CPP_MIN_LOG_LEVEL=3, which every process that the caller
  starts afterwards would inherit (their TensorFlow errors silenced); the caller's value, or its
  absence, is put back.
  """
  before = os.environ.get(_TF_LOG_LEVEL)
  try:
    import tf2onnx.convert  # pylint: disable=import-outside-toplevel
  finally:
    if before is None:
      os.environ.pop(_TF_LOG_LEVEL, None)
    else:
      os.environ[_TF_LOG_LEVEL] = before
  return tf2onnx


# Held while tf2onnx's optimizer registry holds this module's factories.
_REGISTRY_LOCK = threading.Lock()


@contextlib.contextmanager
def _garbage_collected_between_optimizer_passes():
  """During the block, Python's garbage is collected before each of tf2onnx's graph optimizer
  passes.

  tf2onnx runs a dozen optimizers over the ONNX graph until none changes it, each on a deep copy
  of the graph, and drops the copy before. A dropped graph holds every weight of the model (and
  each pass's protobuf rewrites of them); its nodes and the graph refer to each other, so only the
  cycle collector frees it, which seldom runs during the conversion, and the dropped copies pile
  up. The optimizers are found in tf2onnx's registry (`tf2onnx.optimizer._optimizers`); where a
  version has none, the conversion runs as it is. The registry is module state: conversions in
  several threads take turns, so that each gives back the factories it found.

  The objects that exist when the block starts (TensorFlow's and Keras' modules, the model) are
  frozen for its length (`gc.freeze`), so each collection looks only at what the conversion
  made, not at the whole process: collecting the whole process each time would cost more than
  the conversion of a small model. Where the caller froze objects already, they are left frozen.
  """
  from tf2onnx import optimizer  # pylint: disable=import-outside-toplevel

  registry = getattr(optimizer, "_optimizers", None)
  if not isinstance(registry, dict):
    yield
    return

  def collecting(factory):
    def make():
      gc.collect()
      return factory()
    return make

  with _REGISTRY_LOCK:
    # A caller's own freeze (a server that forks, say) is theirs to undo.
    freeze = gc.get_freeze_count() == 0
    if freeze:
      gc.freeze()
    factories = dict(registry)
    registry.update({name: collecting(factory) for name, factory in factories.items()})
    try:
      yield
    finally:
      registry.update(factories)
      if freeze:
        gc.unfreeze()


def _int8(proto, config):
  """`proto` after ONNX Runtime's BERT fusions and dynamic int8 quantization."""
  import onnx  # pylint: disable=import-outside-toplevel
  from onnxruntime import quantization  # pylint: disable=import-outside-toplevel
  from onnxruntime.transformers import optimizer  # pylint: disable=import-outside-toplevel

  fused = optimizer.optimize_model(proto, model_type="bert_tf",
                                   num_heads=config.num_attention_heads,
                                   hidden_size=config.hidden_size).model
  with tempfile.TemporaryDirectory() as workdir:
    path = os.path.join(workdir, "int8.onnx")
    quantization.quantize_dynamic(fused, path, weight_type=quantization.QuantType.QInt8,
                                  # The fused operators' outputs have no inferred type.
                                  extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return onnx.load(path)


def is_ours(data):
  """Whether `data` (a file's bytes) is an ONNX export of this package."""
  import onnx  # pylint: disable=import-outside-toplevel

  try:
    proto = onnx.load_model_from_string(data)
  except Exception:  # noqa: BLE001  (any bytes that do not parse are not ours)
    return False
  return any(prop.key == formats.MARK for prop in proto.metadata_props)


def export(model, info, path, *, max_seq_length, do_lower_case=None, precision="float32"):
  """Writes the `.onnx` file of `convert` to `path` whole (`do_lower_case` is the client's
  tokenizer's, not the file's).

  Returns:
    `path`.
  """
  del do_lower_case
  return formats.write_file(path, convert(model, info, max_seq_length=max_seq_length,
                                          precision=precision))
