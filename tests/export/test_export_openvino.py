"""Tests of the OpenVINO export (`official_bert/export/openvino.py`) and its calibration
(`calibration.py`).

One tiny sentence-pair classifier folder is exported in float32 and in int8 (module fixture; the
int8 folder calibrated on a text file); OpenVINO's CPU plugin runs
both, and they must give what the SavedModel computes (`test_export.py` holds the SavedModel to
the Keras model): the float32 folder within 1e-4, the int8 one close, with its products quantized.
"""

import logging
import os
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertSpanLabeler, tokenization
from official_bert.checkpoints import model_info
from official_bert.data import classifier_features
from official_bert.data.classifier_data import InputExample
from official_bert.export import (
  FormatError,
  archive,
  calibration,
  export_model_dir_as,
  export_task_model_as,
  formats,
  signatures,
)

from testing import assert_one_line_error, run_python, tiny_bert_config, tiny_pair_classifier_folder

openvino = pytest.importorskip("openvino")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "export_saved_model.py"
SEQ = 24
LABELS = ["no", "yes"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a",
         "dog", "ran", "in", "park", "it", "is", "not", "good", "bad", "film", "##s", "."]
PAIRS = [("the cat sat on the mat.", "a dog ran in the park."), ("it is not good", "the film"),
         ("the dogs ran", ""), ("a bad film . " * 6, "cats sat on mats " * 5),
         ("the park is good", "it is a film")]


def _ids(vocab, pairs):
  packer = signatures.TextPacker(vocab, True, SEQ, ())
  inputs = packer(tf.constant([p[0] for p in pairs]), tf.constant([p[1] for p in pairs]))
  return {name: value.numpy() for name, value in inputs.items()}


def _run(path, inputs, hint="f32"):
  """The outputs of an OpenVINO export on `inputs`, by each of their names."""
  config = {"INFERENCE_PRECISION_HINT": hint} if hint else {}
  compiled = openvino.Core().compile_model(os.path.join(path, "model.xml"), "CPU", config)
  results = compiled(inputs)
  return {name: results[output] for output in compiled.outputs for name in output.get_names()}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
  root = tmp_path_factory.mktemp("openvino")
  vocab, model, model_dir = tiny_pair_classifier_folder(root, VOCAB, LABELS, SEQ)
  texts = root / "calibration.txt"
  texts.write_text("".join(f"{a}\t{b}\n" if b else f"{a}\n" for a, b in PAIRS * 8))
  float32 = export_model_dir_as(model_dir, root / "float32", format="openvino")
  # The int8 export quiets NNCF's logger while it quantizes: a handler of the caller's on that
  # logger, and the logger, keep their levels (`test_int8_export_leaves_...`).
  nncf_logger = logging.getLogger("nncf")
  theirs = logging.StreamHandler()
  theirs.setLevel(logging.INFO)
  nncf_logger.addHandler(theirs)
  try:
    before = nncf_logger.level, [handler.level for handler in nncf_logger.handlers]
    int8 = export_model_dir_as(model_dir, root / "int8" / "1", format="openvino",
                               precision="int8", calibration=texts)
    after = nncf_logger.level, [handler.level for handler in nncf_logger.handlers]
  finally:
    nncf_logger.removeHandler(theirs)
  return {"root": root, "vocab": vocab, "model": model, "model_dir": model_dir,
          "float32": str(float32), "int8": str(int8), "texts": texts,
          "nncf_levels": (before, after)}


def test_openvino_takes_token_ids_and_matches_the_saved_model(exports):
  inputs = _ids(exports["vocab"], PAIRS)
  got = _run(exports["float32"], inputs)
  want = signatures.class_outputs(exports["model"](inputs, training=False)["logits"], LABELS)
  for name in ("logits", "probabilities"):
    np.testing.assert_allclose(got[name], want[name].numpy(), atol=1e-4, rtol=0, err_msg=name)
  np.testing.assert_array_equal(got["label_id"], want["label_id"].numpy())
  files = sorted(os.listdir(exports["float32"]))
  assert files == ["model.bin", "model.xml", archive.EXPORT_MARK]
  mark = archive.read_mark(exports["float32"])
  assert (mark["format"], mark["kind"], mark["precision"], mark["max_seq_length"]) == (
      "official_bert OpenVINO", "classifier", "float32", SEQ)


def test_openvino_int8_quantizes_the_products_and_stays_close(exports):
  operators = {op.get_type_name()
               for op in openvino.Core().read_model(exports["int8"] + "/model.xml").get_ops()}
  assert "FakeQuantize" in operators, operators
  assert archive.read_mark(exports["int8"])["precision"] == "int8"
  inputs = _ids(exports["vocab"], PAIRS)
  int8 = _run(exports["int8"], inputs, hint=None)["logits"]
  float32 = _run(exports["float32"], inputs)["logits"]
  assert not np.array_equal(int8, float32)
  np.testing.assert_allclose(int8, float32, atol=0.05)


def test_calibration_reads_records_and_text_as_the_model_sees_them(exports, tmp_path):
  tokenizer = tokenization.FullTokenizer(exports["vocab"], do_lower_case=True)
  examples = [InputExample(str(i), a, b or None, "yes") for i, (a, b) in enumerate(PAIRS)]
  records = tmp_path / "eval.tf_record"
  classifier_features.file_based_convert_examples_to_features(examples, LABELS, SEQ, tokenizer,
                                                              str(records))
  from_records = calibration.read_file(records, "classifier")
  from_text = calibration.read_file(exports["texts"], "classifier", vocab_file=exports["vocab"],
                                    do_lower_case=True, max_seq_length=SEQ, limit=len(PAIRS))
  want = _ids(exports["vocab"], PAIRS)
  for got in (from_records, from_text):
    assert len(got) == len(PAIRS)
    for name in calibration.INPUT_NAMES:
      np.testing.assert_array_equal(np.concatenate([e[name] for e in got]), want[name],
                                    err_msg=name)
  assert len(calibration.read_file(exports["texts"], "classifier", vocab_file=exports["vocab"],
                                   do_lower_case=True)) == len(PAIRS) * 8


def test_bad_calibration_examples_are_refused_before_any_work(exports, tmp_path):
  model_dir, target = exports["model_dir"], tmp_path / "out"
  cases = [(tmp_path / "missing.txt", "does not exist"), (tmp_path / "empty.txt", "is empty"),
           (tmp_path / "bad.txt", r"bad.txt line 3: expected a text, or two texts separated by a "
                                  "tab, got 3 fields"),
           (tmp_path / "blank.txt", "holds no examples"),
           (tmp_path / "latin1.txt", "line 1 is not UTF-8"),
           (tmp_path / "text.tf_record", "not a TFRecord file")]
  (tmp_path / "empty.txt").write_text("")
  (tmp_path / "bad.txt").write_text("the cat\n\none\ttwo\tthree\n")
  (tmp_path / "blank.txt").write_text("\n  \n\n")
  (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
  (tmp_path / "text.tf_record").write_text("the cat sat\n")
  for path, message in cases:
    with pytest.raises(calibration.CalibrationError, match=message):
      export_model_dir_as(model_dir, target, format="openvino", precision="int8",
                          calibration=path)
  # The folder has no eval.tf_record of a fine-tuning run: the file must be named.
  with pytest.raises(calibration.CalibrationError, match="give --calibration_file"):
    export_model_dir_as(model_dir, target, format="openvino", precision="int8")
  with pytest.raises(FormatError, match="--calibration_file is for the openvino format in int8"):
    export_model_dir_as(model_dir, tmp_path / "m.onnx", format="onnx", precision="int8",
                        calibration=exports["texts"])
  span_labeler = BertSpanLabeler(tiny_bert_config(len(VOCAB)))
  info = model_info(span_labeler, vocab_file=exports["vocab"], do_lower_case=True)
  with pytest.raises(calibration.CalibrationError, match="span_labeler model is calibrated on a "
                     "TFRecord file"):
    export_task_model_as(span_labeler, info, target, format="openvino", precision="int8",
                         calibration=exports["texts"])
  assert not target.exists() and not list(tmp_path.glob("*.tmp-*"))


def test_an_openvino_folder_never_replaces_files_not_written_by_the_package(exports, tmp_path):
  theirs = tmp_path / "theirs"
  theirs.mkdir()
  (theirs / "model.xml").write_text("their model")
  with pytest.raises(archive.ExportDirError, match="no export of this package"):
    export_model_dir_as(exports["model_dir"], theirs, format="openvino", overwrite=True)
  assert os.listdir(theirs) == ["model.xml"]
  result = run_python([sys.executable, str(SCRIPT), f"--model_dir={exports['model_dir']}",
                       f"--export_dir={exports['float32']}", "--format=openvino",
                       "--precision=int8", f"--calibration_file={exports['texts']}"],
                      timeout=300)
  assert_one_line_error((result.returncode, result.stderr), "holds an earlier export",
                        "--overwrite")


def test_a_runs_openvino_target_is_checked_with_its_calibration_file(exports, tmp_path):
  formats.check_export_target(str(tmp_path / "served"), "openvino", "int8",
                              str(exports["texts"]))
  with pytest.raises(calibration.CalibrationError, match="missing.txt does not exist"):
    formats.check_export_target(str(tmp_path / "served"), "openvino", "int8",
                                str(tmp_path / "missing.txt"))
  with pytest.raises(calibration.CalibrationError, match="multiple_choice model is calibrated"):
    formats.check_kind("openvino", "multiple_choice", str(exports["texts"]))
  with pytest.raises(FormatError, match="--calibration_file is for"):
    formats.check_export_settings("openvino", "float32", has_export_dir=True,
                                  calibration_file="x.txt")
  assert not os.listdir(tmp_path)


def test_openvino_without_its_packages_names_the_extra(monkeypatch, tmp_path):
  real = formats.importlib.util.find_spec
  monkeypatch.setattr(formats.importlib.util, "find_spec",
                      lambda name: None if name == "nncf" else real(name))
  with pytest.raises(FormatError, match=r'needs nncf, which is not installed: pip install '
                     r'"official_bert\[openvino\]"'):
    formats.check_export_target(str(tmp_path / "served"), "openvino", "int8")
  assert not os.listdir(tmp_path)


def test_int8_export_leaves_the_callers_logging_as_it_found_it(exports):
  # Not `nncf.set_log_level`, which sets every handler on NNCF's logger (a caller's; pytest's
  # log capture, which then saw nothing for the rest of the session) to ERROR for good.
  before, after = exports["nncf_levels"]
  assert logging.INFO in before[1]
  assert after == before
