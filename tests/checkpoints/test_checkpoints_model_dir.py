"""Tests of the model folder (`official_bert.checkpoints.model_dir`): save, load, the manifest."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from official_bert import (
  BertClassifier,
  BertConfig,
  BertEncoder,
  BertMultipleChoice,
  BertPretrainer,
  BertSpanLabeler,
  BertTokenClassifier,
  export_pretrained_dir,
)
from official_bert.checkpoints import (
  MANIFEST_NAME,
  WEIGHTS_NAME,
  ModelInfo,
  load_model,
  load_model_dir,
  restore_encoder_weights,
  save_model_dir,
)
from official_bert.common import registry

from testing import shared_data, tiny_bert_config

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".",
         "a", "dog", "##s", "ran"]
CONFIG = tiny_bert_config(24, hidden_size=32)
MODEL_FILES = ["bert_config.json", MANIFEST_NAME, "vocab.txt", WEIGHTS_NAME]


@pytest.fixture(name="vocab_file")
def fixture_vocab_file(tmp_path):
  path = tmp_path / "vocab" / "vocab.txt"
  path.parent.mkdir()
  path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(name="encoder", scope="module")
def fixture_encoder():
  """One encoder for the tests that only save it (none changes its weights)."""
  return BertEncoder(CONFIG)


def _inputs(shape, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, len(VOCAB), size=shape).astype("int32")
  mask = np.ones(shape, "int32")
  mask[..., -2:] = 0
  return {"input_word_ids": ids * mask, "input_mask": mask,
          "input_type_ids": np.zeros(shape, "int32")}


def _outputs(model, inputs):
  outputs = dict(model(inputs, training=False))
  if "encoder_outputs" in outputs:
    outputs["encoder_outputs"] = np.stack(outputs["encoder_outputs"])
  return {name: np.asarray(value) for name, value in outputs.items()}


CASES = {
    "classifier": (lambda: BertClassifier(CONFIG, num_classes=3), (2, 8),
                   {"labels": ["contradiction", "entailment", "neutral"],
                    "extra": {"sentence_pair": True}}),
    "regression": (lambda: BertClassifier(CONFIG, num_classes=1), (2, 8),
                   {"is_regression": True}),
    "span_labeler": (lambda: BertSpanLabeler(CONFIG), (2, 8), {"extra": {"max_query_length": 4}}),
    "multiple_choice": (lambda: BertMultipleChoice(CONFIG, num_choices=4), (2, 4, 8), {}),
    "token_classifier": (lambda: BertTokenClassifier(CONFIG, num_classes=3), (2, 8),
                         {"labels": ["O", "B-PER", "I-PER"]}),
    "encoder": (lambda: BertEncoder(CONFIG), (2, 8), {}),
    "pretrainer": (lambda: BertPretrainer(CONFIG), (2, 8), {}),
}


def test_every_registered_kind_has_a_case():
  assert set(registry.kinds()) <= set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trip_gives_identical_outputs(case, tmp_path, vocab_file):
  make_model, shape, options = CASES[case]
  model = make_model()
  output_dir = tmp_path / "output"
  output_dir.mkdir()
  (output_dir / "model.ckpt-10.index").write_text("left by training")
  save_model_dir(model, output_dir, vocab_file=vocab_file, do_lower_case=True, max_seq_length=8,
                 **options)

  assert sorted(os.listdir(output_dir)) == sorted(MODEL_FILES + ["model.ckpt-10.index"])
  loaded, info = load_model_dir(output_dir)
  assert type(loaded) is type(model) and info.kind == type(model).kind
  assert info.config == CONFIG and loaded.get_config() == model.get_config()
  assert info.do_lower_case is True and info.max_seq_length == 8
  assert info.labels == (tuple(options["labels"]) if "labels" in options else None)
  assert info.is_regression is options.get("is_regression", False)
  assert info.extra == options.get("extra", {})
  assert info.vocab_file == str(output_dir / "vocab.txt")
  inputs = _inputs(shape)
  if case == "pretrainer":
    inputs["masked_lm_positions"] = np.array([[1, 2], [3, 0]], "int32")
  expected, actual = _outputs(model, inputs), _outputs(loaded, inputs)
  assert sorted(actual) == sorted(expected)
  for name, value in expected.items():
    np.testing.assert_array_equal(actual[name], value, err_msg=name)


def test_manifest_content(tmp_path, vocab_file):
  save_model_dir(BertClassifier(CONFIG, num_classes=2, name="sst"), tmp_path,
                 vocab_file=vocab_file, do_lower_case=False, max_seq_length=16, labels=[0, 1],
                 extra={"task_name": "sst-2"})
  values = json.loads((tmp_path / MANIFEST_NAME).read_text())
  assert values == {"kind": "classifier", "labels": ["0", "1"], "is_regression": False,
                    "max_seq_length": 16, "do_lower_case": False,
                    "extra": {"task_name": "sst-2"},
                    "model_config": {"kernels": "auto", "num_classes": 2, "dropout_rate": 0.1,
                                     "name": "sst", "trainable": True}}
  assert (tmp_path / "vocab.txt").read_text() == "\n".join(VOCAB) + "\n"
  assert BertConfig.from_json_file(tmp_path / "bert_config.json") == CONFIG


def test_a_folder_loads_under_the_policy_the_reader_chooses(tmp_path, vocab_file):
  model = BertClassifier(CONFIG, num_classes=2, dtype="mixed_bfloat16")
  save_model_dir(model, tmp_path, vocab_file=vocab_file)
  assert load_model_dir(tmp_path)[0].dtype_policy.name == "float32"
  mixed, _ = load_model_dir(tmp_path, dtype="mixed_bfloat16")
  assert mixed.encoder.transformer_layers[0].compute_dtype == "bfloat16"


def test_fine_tuned_folder_initialises_another_task_model(tmp_path, vocab_file):
  span = BertSpanLabeler(CONFIG)
  save_model_dir(span, tmp_path, vocab_file=vocab_file, do_lower_case=True, max_seq_length=8)
  classifier = BertClassifier(CONFIG, num_classes=2)
  restore_encoder_weights(classifier, tmp_path)
  for expected, actual in zip(span.encoder.weights, classifier.encoder.weights):
    np.testing.assert_array_equal(actual.numpy(), expected.numpy(), err_msg=expected.path)


def test_pretrained_folder_loads_as_encoder(tmp_path, vocab_file, encoder):
  export_pretrained_dir(encoder, CONFIG, tmp_path, vocab_file=vocab_file)
  loaded, info = load_model(tmp_path)
  assert isinstance(loaded, BertEncoder)
  assert info == ModelInfo(kind="encoder", config=CONFIG, vocab_file=str(tmp_path / "vocab.txt"),
                           model_config={"kernels": "auto", "name": encoder.name,
                                         "trainable": True})
  inputs = _inputs((1, 6))
  np.testing.assert_array_equal(_outputs(loaded, inputs)["pooled_output"],
                                _outputs(encoder, inputs)["pooled_output"])


def test_original_tf1_checkpoint_folder_loads_as_encoder():
  folder = shared_data("checkpoints/tf1_tiny_random")
  loaded, info = load_model(folder)
  assert isinstance(loaded, BertEncoder)
  assert info.kind == "encoder" and info.config.hidden_size == 4
  assert info.do_lower_case is None and info.max_seq_length is None
  assert info.vocab_file == os.path.join(folder, "vocab.txt")


def test_pretrained_folder_without_vocab_has_none(tmp_path, encoder):
  export_pretrained_dir(encoder, CONFIG, tmp_path)
  assert load_model(tmp_path)[1].vocab_file is None


def test_folder_without_a_model_is_refused(tmp_path):
  with pytest.raises(FileNotFoundError, match="no model.json"):
    load_model_dir(tmp_path)
  with pytest.raises(FileNotFoundError, match="No BERT checkpoint"):
    load_model(tmp_path)


def test_bad_manifest_names_file_and_field(tmp_path, vocab_file):
  save_model_dir(BertClassifier(CONFIG, num_classes=2), tmp_path, vocab_file=vocab_file,
                 do_lower_case=True, max_seq_length=16)
  values = json.loads((tmp_path / MANIFEST_NAME).read_text())
  (tmp_path / MANIFEST_NAME).write_text(json.dumps({**values, "max_seq_length": "16"}))
  with pytest.raises(ValueError, match=r"model\.json: field 'max_seq_length' must be int"):
    load_model_dir(tmp_path)
  (tmp_path / MANIFEST_NAME).write_text('{"kind": "classifier",\n "max_seq_length": }')
  with pytest.raises(ValueError, match=r"model\.json: not valid JSON at line 2"):
    load_model_dir(tmp_path)
  (tmp_path / MANIFEST_NAME).write_text(json.dumps({**values, "kind": "translation"}))
  with pytest.raises(ValueError, match="field 'kind' must be one of classifier, encoder"):
    load_model_dir(tmp_path)


class UnregisteredClassifier(BertClassifier):
  pass


@pytest.mark.parametrize("make_model,options,error", [
    (lambda: BertClassifier(CONFIG, num_classes=1), {}, "pass is_regression=True"),
    (lambda: BertClassifier(CONFIG, num_classes=2), {"is_regression": True},
     "is_regression needs a model with one output"),
    (lambda: BertClassifier(CONFIG, num_classes=2), {"labels": ["a"]}, "1 labels given"),
    (lambda: BertSpanLabeler(CONFIG), {"labels": ["a"]}, "1 labels given"),
    (lambda: UnregisteredClassifier(CONFIG, num_classes=2), {}, "no registered model class"),
])
def test_save_refuses_fields_that_do_not_fit_the_model(make_model, options, error, tmp_path,
                                                       vocab_file):
  with pytest.raises((TypeError, ValueError), match=error):
    save_model_dir(make_model(), tmp_path / "out", vocab_file=vocab_file, **options)
  assert not (tmp_path / "out").exists()


def test_save_refuses_a_vocabulary_larger_than_the_model(tmp_path, encoder):
  vocab = tmp_path / "big_vocab.txt"
  vocab.write_text("\n".join(VOCAB + [f"w{i}" for i in range(20)]) + "\n")
  with pytest.raises(ValueError, match="35 tokens but the model's vocab_size is 24"):
    save_model_dir(encoder, tmp_path / "out", vocab_file=vocab)


def test_interrupted_save_keeps_the_previous_model(tmp_path, vocab_file, monkeypatch):
  first = BertClassifier(CONFIG, num_classes=2)
  output_dir = tmp_path / "output"
  save_model_dir(first, output_dir, vocab_file=vocab_file, do_lower_case=True, max_seq_length=8)

  def fail(*args, **kwargs):
    raise OSError("disk full")

  monkeypatch.setattr(tf.io.gfile, "copy", fail)
  with pytest.raises(OSError, match="disk full"):
    save_model_dir(BertClassifier(CONFIG, num_classes=2), output_dir, vocab_file=vocab_file,
                   do_lower_case=True, max_seq_length=8)
  assert sorted(os.listdir(output_dir)) == sorted(MODEL_FILES)
  loaded, _ = load_model_dir(output_dir)
  inputs = _inputs((2, 8))
  np.testing.assert_array_equal(_outputs(loaded, inputs)["logits"],
                                _outputs(first, inputs)["logits"])


def test_a_folder_on_another_file_system_round_trips(vocab_file):
  model = BertTokenClassifier(CONFIG, num_classes=3)
  folder = "ram://test_model_dir/tagger"
  save_model_dir(model, folder, vocab_file=vocab_file, labels=["O", "B", "I"])
  assert sorted(tf.io.gfile.listdir(folder)) == sorted(MODEL_FILES)
  loaded, info = load_model_dir(folder)
  assert info.labels == ("O", "B", "I") and info.vocab_file == f"{folder}/vocab.txt"
  inputs = _inputs((2, 8))
  np.testing.assert_array_equal(_outputs(loaded, inputs)["logits"],
                                _outputs(model, inputs)["logits"])
