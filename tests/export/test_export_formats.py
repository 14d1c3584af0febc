"""Tests of the LiteRT and ONNX exports (`official_bert/export/formats.py`, `litert.py`, `onnx.py`).

One tiny sentence-pair classifier folder is exported once per format (module fixture; the LiteRT
file by `export_saved_model.py`); the LiteRT file runs in LiteRT's interpreter with
tensorflow-text's kernels, the ONNX file in ONNX Runtime, and both must give what the SavedModel
computes (`test_export.py` holds the SavedModel to the Keras model): the model's outputs on the ids
of the package's tokenizer. `benchmarks/litert_tokens.py` compares the files with a SavedModel on
1,000 GLUE sentences.
"""

import csv
import os
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertSpanLabeler, tokenization
from official_bert.checkpoints import model_info
from official_bert.export import (
  ExportFileError,
  FormatError,
  export_model_dir_as,
  export_task_model_as,
  formats,
  litert,
  signatures,
)

from testing import (
  SHARED_DATA,
  run_python,
  tiny_bert_config,
  tiny_pair_classifier_folder,
  write_vocab,
)

pytest.importorskip("ai_edge_litert")
onnxruntime = pytest.importorskip("onnxruntime")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "export_saved_model.py"
SEQ = 24
LABELS = ["no", "yes", "maybe"]
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "in", "park", "it", "is", "not",
         "good", "bad", "film", "very", "and", "cafe", "##s", "##ed", "##ing", ".", ",", "'", "?",
         "!", "(", ")", "-", "μ", "µ", "..."]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
PAIRS = [("The cat sat on the mat.", "A dog ran in the park."),
         ("Café!  It is NOT good", ""),
         ("", "the film"),
         ("the " * 30, "dog ran " * 20),
         ("x" * 250 + " sat " + "é" * 150 + "a" * 60, "cats sat, dogs ran?"),
         # Characters that tf.text's own normalizer would change (its NFKC case folding).
         ("The µ cat\u00ads sat…", "a ﬁlm, ＧＯＯＤ")]


def _glue_pairs(count):
  """MRPC dev sentence pairs when the shared data is there, else none."""
  path = SHARED_DATA / "glue" / "MRPC" / "dev.tsv"
  if not path.exists():
    return []
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:count + 1]
  return [(row[3], row[4]) for row in rows]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  root = tmp_path_factory.mktemp("formats")
  vocab, model, model_dir = tiny_pair_classifier_folder(root, VOCAB, LABELS, SEQ)
  tflite = root / "model.tflite"
  run_python([sys.executable, str(SCRIPT), f"--model_dir={model_dir}",
              f"--export_dir={tflite}", "--format=litert"], check=True, timeout=300)
  onnx_file = export_model_dir_as(model_dir, root / "model.onnx", format="onnx")
  return {"root": root, "vocab": vocab, "model": model, "model_dir": model_dir,
          "tflite": tflite, "onnx": onnx_file}


def _served(model, inputs):
  """What the classifier's SavedModel signatures give on `inputs` (the encoder's input dict)."""
  return signatures.class_outputs(model(inputs, training=False)["logits"], LABELS)


def _assert_close(actual, expected, names):
  for name in names:
    np.testing.assert_allclose(actual[name], expected[name].numpy(), atol=1e-4, rtol=0,
                               err_msg=name)


def test_litert_takes_raw_text_and_matches_the_saved_model(exports):
  pairs = PAIRS + _glue_pairs(40)
  text_a, text_b = (np.array([pair[i] for pair in pairs], dtype=object) for i in (0, 1))
  runner = litert.load_interpreter(model_path=str(exports["tflite"])).get_signature_runner()
  assert set(runner.get_input_details()) == {"text_a", "text_b"}
  got = runner(text_a=text_a, text_b=text_b)
  packer = signatures.TextPacker(exports["vocab"], True, SEQ, ())
  want = _served(exports["model"], packer(tf.constant(text_a.tolist()),
                                          tf.constant(text_b.tolist())))
  assert set(got) == set(want)
  _assert_close(got, want, ["logits", "probabilities"])
  np.testing.assert_array_equal(got["label_id"], want["label_id"].numpy())
  assert [label.decode() for label in got["label"]] == [
      label.decode() for label in want["label"].numpy()]


def test_litert_packs_the_ids_of_the_package_tokenizer(tmp_path):
  tokens = write_vocab(tmp_path / "vocab.txt", VOCAB)
  pairs = PAIRS + _glue_pairs(200)
  text_a, text_b = (tf.constant([pair[i] for pair in pairs]) for i in (0, 1))
  for lower in (True, False):
    expected = signatures.TextPacker(tokens, lower, SEQ, ())
    packer = litert.LiteRtTextPacker(tokens, lower, SEQ)
    for args in ((text_a,), (text_a, text_b), (text_b, text_a)):
      got, want = packer(*args), expected(*args)
      for name in want:
        np.testing.assert_array_equal(got[name].numpy(), want[name].numpy(), err_msg=name)


def test_litert_tokens_are_the_originals_where_tf_texts_own_normalizer_differs(tmp_path):
  # tf.text's own table folds as NFKC case folding does (the micro sign becomes mu, the ligature
  # "fi" two letters, full-width letters ASCII, "ß" "ss") and turns a soft hyphen or a zero-width
  # joiner into a space; the file's table keeps the original's rules.
  vocab = VOCAB + ["ß", "ss", "ﬁ", "fi", "ａ", "Ａ", "coop", "ab", "guru", "##guru", "ς", "σ",
                   "…", "istanbul", "α", "##ς", "##σ"]
  tokens = write_vocab(tmp_path / "vocab.txt", vocab)
  texts = ["µguru µ μ", "ß ss ﬁ fi", "Ａ ａ", "co\u00adop a\u200db", "… ...", "İstanbul",
           "σς"]
  for lower in (True, False):
    tokenizer = tokenization.FullTokenizer(tokens, do_lower_case=lower)
    packer = litert.LiteRtTextPacker(tokens, lower, 16)
    for text in texts:
      got = packer(tf.constant([text]))["input_word_ids"].numpy()[0]
      want = tokenizer.convert_tokens_to_ids(["[CLS]", *tokenizer.tokenize(text), "[SEP]"])
      assert [vocab[i] for i in got[:len(want)]] == [vocab[i] for i in want], (lower, text)
  # The one rule of context: `str.lower` ends a word with the final sigma, a table cannot.
  got = litert.LiteRtTextPacker(tokens, True, 8)(tf.constant(["ΑΣ"]))["input_word_ids"]
  assert [vocab[i] for i in got.numpy()[0, 1:3]] == ["α", "##σ"]
  assert tokenization.FullTokenizer(tokens, do_lower_case=True).tokenize("ΑΣ") == ["α", "##ς"]


def test_onnx_takes_token_ids_and_matches_the_saved_model(exports):
  packer = signatures.TextPacker(exports["vocab"], True, SEQ, ())
  inputs = packer(tf.constant([p[0] for p in PAIRS]), tf.constant([p[1] for p in PAIRS]))
  session = onnxruntime.InferenceSession(str(exports["onnx"]))
  assert {i.name for i in session.get_inputs()} == set(inputs)
  names = [output.name for output in session.get_outputs()]
  got = dict(zip(names, session.run(names, {k: v.numpy() for k, v in inputs.items()})))
  want = _served(exports["model"], inputs)
  assert set(got) == set(want)
  _assert_close(got, want, ["logits", "probabilities"])
  np.testing.assert_array_equal(got["label_id"], want["label_id"].numpy())


def _token_id_inputs(vocab):
  """The ONNX file's inputs for `PAIRS`, as NumPy arrays."""
  packer = signatures.TextPacker(vocab, True, SEQ, ())
  return {k: v.numpy() for k, v in packer(tf.constant([p[0] for p in PAIRS]),
                                          tf.constant([p[1] for p in PAIRS])).items()}


def test_onnx_int8_quantizes_the_products_and_stays_close(exports, tmp_path):
  import onnx  # pylint: disable=import-outside-toplevel

  path = export_model_dir_as(exports["model_dir"], tmp_path / "int8.onnx", format="onnx",
                             precision="int8")
  operators = {node.op_type for node in onnx.load(str(path)).graph.node}
  assert operators & {"DynamicQuantizeMatMul", "MatMulInteger"}, operators
  inputs = _token_id_inputs(exports["vocab"])
  int8, = onnxruntime.InferenceSession(str(path)).run(["logits"], inputs)
  float32, = onnxruntime.InferenceSession(str(exports["onnx"])).run(["logits"], inputs)
  np.testing.assert_allclose(int8, float32, atol=0.05)


def test_the_onnx_conversion_frees_each_optimizer_pass_dropped_graph(exports, tmp_path):
  # tf2onnx's optimizers each work on a deep copy of the graph, all weights included, and drop the
  # one before; only a full collection frees the dropped graphs.
  import gc  # pylint: disable=import-outside-toplevel

  from tf2onnx import optimizer  # pylint: disable=import-outside-toplevel

  registry = dict(optimizer._optimizers)  # pylint: disable=protected-access
  full_collections = []

  def count(phase, info):
    if phase == "start" and info["generation"] == 2:
      full_collections.append(1)

  gc.callbacks.append(count)
  try:
    export_model_dir_as(exports["model_dir"], tmp_path / "again.onnx", format="onnx")
  finally:
    gc.callbacks.remove(count)
  # At least one before each pass of the first round over every optimizer.
  assert len(full_collections) >= len(registry), len(full_collections)
  assert optimizer._optimizers == registry  # pylint: disable=protected-access
  inputs = _token_id_inputs(exports["vocab"])
  again, = onnxruntime.InferenceSession(str(tmp_path / "again.onnx")).run(["logits"], inputs)
  first, = onnxruntime.InferenceSession(str(exports["onnx"])).run(["logits"], inputs)
  np.testing.assert_array_equal(again, first)


def test_the_onnx_optimizer_registry_is_given_back_when_a_conversion_fails(monkeypatch):
  from tf2onnx import optimizer  # pylint: disable=import-outside-toplevel

  from official_bert.export import onnx as onnx_export  # pylint: disable=import-outside-toplevel

  registry = dict(optimizer._optimizers)  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="stopped"):
    with onnx_export._garbage_collected_between_optimizer_passes():  # pylint: disable=protected-access
      assert optimizer._optimizers != registry  # pylint: disable=protected-access
      raise ValueError("stopped")
  assert optimizer._optimizers == registry  # pylint: disable=protected-access
  # A tf2onnx without the registry converts as it is.
  monkeypatch.delattr(optimizer, "_optimizers")
  with onnx_export._garbage_collected_between_optimizer_passes():  # pylint: disable=protected-access
    pass


def test_the_conversion_collects_only_what_it_made_and_leaves_a_callers_freeze(monkeypatch):
  import gc  # pylint: disable=import-outside-toplevel

  from official_bert.export import onnx as onnx_export  # pylint: disable=import-outside-toplevel

  def block():
    return onnx_export._garbage_collected_between_optimizer_passes()  # pylint: disable=protected-access

  assert gc.get_freeze_count() == 0
  existing = len(gc.get_objects())
  with block():
    # What existed before the block is out of the collections' sight: they cost what the
    # conversion made, not the whole process.
    assert gc.get_freeze_count() >= existing
  assert gc.get_freeze_count() == 0
  with pytest.raises(ValueError, match="stopped"):
    with block():
      raise ValueError("stopped")
  assert gc.get_freeze_count() == 0
  # A caller that froze its objects itself finds them frozen after the block, and nothing of
  # the block's frozen with them.
  gc.freeze()
  monkeypatch.setattr(gc, "unfreeze", lambda: pytest.fail("the caller's freeze was undone"))
  monkeypatch.setattr(gc, "freeze", lambda: pytest.fail("the block froze into the caller's"))
  try:
    with block():
      pass
    assert gc.get_freeze_count() > 0
  finally:
    monkeypatch.undo()
    gc.unfreeze()


def test_an_onnx_export_leaves_the_process_environment_as_it_was(exports, tmp_path,
                                                                 monkeypatch):
  # Importing tf2onnx's converter sets TF_CPP_MIN_LOG_LEVEL=3, for the processes started after.
  import sys  # pylint: disable=import-outside-toplevel

  for module in [name for name in sys.modules if name.startswith("tf2onnx")]:
    monkeypatch.delitem(sys.modules, module)  # imported anew, as in a new process
  for level in ("1", None):
    if level is None:
      monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
      monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
    export_model_dir_as(exports["model_dir"], tmp_path / f"again-{level}.onnx", format="onnx")
    assert os.environ.get("TF_CPP_MIN_LOG_LEVEL") == level
    for module in [name for name in sys.modules if name.startswith("tf2onnx")]:
      monkeypatch.delitem(sys.modules, module)


def test_a_format_without_its_packages_names_the_extra(monkeypatch):
  real = formats.importlib.util.find_spec
  monkeypatch.setattr(formats.importlib.util, "find_spec",
                      lambda name: None if name == "tf2onnx" else real(name))
  with pytest.raises(FormatError, match=r'official_bert\[onnx\]'):
    formats.check_format("onnx")
  formats.check_format("litert")


def test_litert_refuses_a_span_labeler_before_writing(tmp_path):
  vocab = write_vocab(tmp_path / "vocab.txt", VOCAB)
  model = BertSpanLabeler(tiny_bert_config(len(VOCAB)))
  info = model_info(model, vocab_file=vocab, do_lower_case=True)
  with pytest.raises(FormatError, match="span_labeler.*--format=onnx"):
    export_task_model_as(model, info, tmp_path / "squad.tflite", format="litert")
  assert not list(tmp_path.glob("squad*"))


def test_an_output_file_not_written_by_the_package_is_never_replaced(exports, tmp_path):
  for format_name, extension in (("litert", ".tflite"), ("onnx", ".onnx")):
    foreign = tmp_path / f"theirs{extension}"
    foreign.write_bytes(b"someone else's model")
    with pytest.raises(ExportFileError, match="not written by this package"):
      export_model_dir_as(exports["model_dir"], foreign, format=format_name, overwrite=True)
    assert foreign.read_bytes() == b"someone else's model"
    with pytest.raises(ExportFileError, match=f"end it in {extension}"):
      export_model_dir_as(exports["model_dir"], tmp_path / "model.bin", format=format_name)
  ours = exports["tflite"]
  with pytest.raises(ExportFileError, match="--overwrite"):
    export_model_dir_as(exports["model_dir"], ours, format="litert")
  assert litert.is_ours(pathlib.Path(ours).read_bytes())
  assert not list(tmp_path.glob("*.tmp-*"))


def test_export_script_refuses_a_foreign_file_in_one_line(exports):
  foreign = exports["root"] / "foreign.onnx"
  foreign.write_bytes(b"not ours")
  result = run_python([sys.executable, str(SCRIPT), f"--model_dir={exports['model_dir']}",
                       f"--export_dir={foreign}", "--format=onnx"], timeout=300)
  assert result.returncode == 2, result.stderr
  errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and "not written by this package" in errors[0], result.stderr
  assert foreign.read_bytes() == b"not ours"


def test_a_runs_export_target_is_checked_for_the_kind_and_the_file(tmp_path):
  with pytest.raises(FormatError, match="span_labeler.*--format=onnx"):
    formats.check_kind("litert", "span_labeler")
  with pytest.raises(ExportFileError, match="must name the .onnx file"):
    formats.check_export_target(str(tmp_path / "model.tflite"), "onnx", "int8")
  formats.check_kind("onnx", "span_labeler")
  formats.check_export_target(str(tmp_path / "squad.onnx"), "onnx", "int8")
  assert not os.listdir(tmp_path)


def test_a_litert_export_leaves_the_callers_logging_as_it_was(exports, tmp_path, caplog):
  # TensorFlow's converter sets the absl logger to WARNING; the export puts it back.
  import logging  # pylint: disable=import-outside-toplevel

  from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel

  before = logging.getLogger("absl").level
  export_model_dir_as(exports["model_dir"], tmp_path / "again.tflite", format="litert")
  assert logging.getLogger("absl").level == before
  with caplog.at_level(logging.INFO):
    absl_logging.info("still heard")
  assert "still heard" in caplog.text
