"""Tests of the fine-tuned model folder: `save_task_model` and `load_task_model`."""

import json
import os

import numpy as np
import pytest

from conftest import shared_data
from official_bert import (
  BertClassifier,
  BertConfig,
  BertEncoder,
  BertMultipleChoice,
  BertSpanLabeler,
  BertTokenClassifier,
  export_pretrained_dir,
)
from official_bert.export import TASK_FILE, WEIGHTS_FILE, TaskInfo, load_task_model, save_task_model
from official_bert.export import model_dir as model_dir_lib

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".",
         "a", "dog", "##s", "ran"]
CONFIG = BertConfig(vocab_size=24, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64)
MODEL_FILES = ["bert_config.json", TASK_FILE, "vocab.txt"]


@pytest.fixture(name="vocab_file")
def fixture_vocab_file(tmp_path):
  path = tmp_path / "vocab" / "vocab.txt"
  path.parent.mkdir()
  path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
  return str(path)


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
    "classification": (lambda: BertClassifier(CONFIG, num_classes=3), (2, 8),
                       {"labels": ["contradiction", "entailment", "neutral"],
                        "extra": {"sentence_pair": True}}),
    "regression": (lambda: BertClassifier(CONFIG, num_classes=1), (2, 8), {}),
    "span": (lambda: BertSpanLabeler(CONFIG), (2, 8), {"extra": {"max_query_length": 4}}),
    "multiple_choice": (lambda: BertMultipleChoice(CONFIG, num_choices=4), (2, 4, 8), {}),
    "token_classification": (lambda: BertTokenClassifier(CONFIG, num_classes=3), (2, 8),
                             {"labels": ["O", "B-PER", "I-PER"]}),
    "encoder": (lambda: BertEncoder(CONFIG), (2, 8), {}),
}


@pytest.mark.parametrize("task", sorted(CASES))
def test_round_trip_gives_identical_outputs(task, tmp_path, vocab_file):
  make_model, shape, options = CASES[task]
  model = make_model()
  output_dir = tmp_path / "output"
  output_dir.mkdir()
  (output_dir / "model.ckpt-10.index").write_text("left by training")
  save_task_model(model, output_dir, task=task, vocab_file=vocab_file, do_lower_case=True,
                  max_seq_length=8, **options)

  weights = "encoder.weights.h5" if task == "encoder" else WEIGHTS_FILE
  assert sorted(os.listdir(output_dir)) == sorted(MODEL_FILES + [weights, "model.ckpt-10.index"])
  loaded, info = load_task_model(output_dir)
  assert type(loaded) is type(model)
  assert info.task == task and info.config == CONFIG
  assert info.do_lower_case is True and info.max_seq_length == 8
  assert info.labels == (tuple(options["labels"]) if "labels" in options else None)
  assert info.extra == options.get("extra", {})
  assert info.num_choices == (4 if task == "multiple_choice" else None)
  assert info.vocab_file == str(output_dir / "vocab.txt")
  inputs = _inputs(shape)
  expected, actual = _outputs(model, inputs), _outputs(loaded, inputs)
  assert sorted(actual) == sorted(expected)
  for name, value in expected.items():
    np.testing.assert_array_equal(actual[name], value, err_msg=name)


def test_task_file_content(tmp_path, vocab_file):
  save_task_model(BertClassifier(CONFIG, num_classes=2), tmp_path, task="classification",
                  vocab_file=vocab_file, do_lower_case=False, max_seq_length=16,
                  labels=[0, 1], extra={"task_name": "sst-2"})
  values = json.loads((tmp_path / TASK_FILE).read_text())
  assert values == {"task": "classification", "num_classes": 2, "labels": ["0", "1"],
                    "max_seq_length": 16, "do_lower_case": False,
                    "extra": {"task_name": "sst-2"}}
  assert (tmp_path / "vocab.txt").read_text() == "\n".join(VOCAB) + "\n"
  assert BertConfig.from_json_file(tmp_path / "bert_config.json") == CONFIG


def test_pretrained_folder_loads_as_encoder(tmp_path, vocab_file):
  encoder = BertEncoder(CONFIG)
  export_pretrained_dir(encoder, CONFIG, tmp_path, vocab_file=vocab_file)
  loaded, info = load_task_model(tmp_path)
  assert isinstance(loaded, BertEncoder)
  assert info == TaskInfo(task="encoder", config=CONFIG, vocab_file=str(tmp_path / "vocab.txt"))
  inputs = _inputs((1, 6))
  np.testing.assert_array_equal(_outputs(loaded, inputs)["pooled_output"],
                                _outputs(encoder, inputs)["pooled_output"])


def test_original_tf1_checkpoint_folder_loads_as_encoder():
  folder = shared_data("checkpoints/tf1_tiny_random")
  loaded, info = load_task_model(folder)
  assert isinstance(loaded, BertEncoder)
  assert info.task == "encoder" and info.config.hidden_size == 4
  assert info.vocab_file == os.path.join(folder, "vocab.txt")


def test_pretrained_folder_without_vocab_is_refused(tmp_path):
  export_pretrained_dir(BertEncoder(CONFIG), CONFIG, tmp_path)
  with pytest.raises(FileNotFoundError, match="no vocab.txt"):
    load_task_model(tmp_path)


def test_folder_without_a_model_is_refused(tmp_path):
  with pytest.raises(FileNotFoundError, match="no task.json"):
    load_task_model(tmp_path)


def test_bad_task_file_names_file_and_field(tmp_path, vocab_file):
  save_task_model(BertClassifier(CONFIG, num_classes=2), tmp_path, task="classification",
                  vocab_file=vocab_file, do_lower_case=True, max_seq_length=16)
  values = json.loads((tmp_path / TASK_FILE).read_text())
  (tmp_path / TASK_FILE).write_text(json.dumps({**values, "max_seq_length": "16"}))
  with pytest.raises(ValueError, match=r"task\.json: field 'max_seq_length' must be int"):
    load_task_model(tmp_path)
  (tmp_path / TASK_FILE).write_text('{"task": "classification",\n "max_seq_length": }')
  with pytest.raises(ValueError, match=r"task\.json: not valid JSON at line 2"):
    load_task_model(tmp_path)
  (tmp_path / TASK_FILE).write_text(json.dumps({**values, "task": "translation"}))
  with pytest.raises(ValueError, match="field 'task' must be one of"):
    load_task_model(tmp_path)


@pytest.mark.parametrize("task,num_classes,options,error", [
    ("span", 2, {}, TypeError),
    ("classification", 1, {}, ValueError),
    ("regression", 2, {}, ValueError),
    ("classification", 2, {"labels": ["a"]}, ValueError),
    ("summarization", 2, {}, ValueError),
])
def test_save_refuses_a_model_that_does_not_fit_the_task(task, num_classes, options, error,
                                                          tmp_path, vocab_file):
  with pytest.raises(error):
    save_task_model(BertClassifier(CONFIG, num_classes=num_classes), tmp_path / "out",
                    task=task, vocab_file=vocab_file, do_lower_case=True, max_seq_length=8,
                    **options)
  assert not (tmp_path / "out").exists()


def test_save_refuses_a_vocabulary_larger_than_the_model(tmp_path):
  vocab = tmp_path / "big_vocab.txt"
  vocab.write_text("\n".join(VOCAB + [f"w{i}" for i in range(20)]) + "\n")
  with pytest.raises(ValueError, match="35 tokens but the model's vocab_size is 24"):
    save_task_model(BertEncoder(CONFIG), tmp_path / "out", task="encoder", vocab_file=vocab,
                    do_lower_case=True, max_seq_length=8)


def test_interrupted_save_keeps_the_previous_model(tmp_path, vocab_file, monkeypatch):
  first = BertClassifier(CONFIG, num_classes=2)
  output_dir = tmp_path / "output"
  save_task_model(first, output_dir, task="classification", vocab_file=vocab_file,
                  do_lower_case=True, max_seq_length=8)

  def fail(*args, **kwargs):
    raise OSError("disk full")

  monkeypatch.setattr(model_dir_lib.shutil, "copyfile", fail)
  with pytest.raises(OSError, match="disk full"):
    save_task_model(BertClassifier(CONFIG, num_classes=2), output_dir, task="classification",
                    vocab_file=vocab_file, do_lower_case=True, max_seq_length=8)
  assert sorted(os.listdir(output_dir)) == sorted(MODEL_FILES + [WEIGHTS_FILE])
  loaded, _ = load_task_model(output_dir)
  inputs = _inputs((2, 8))
  np.testing.assert_array_equal(_outputs(loaded, inputs)["logits"],
                                _outputs(first, inputs)["logits"])
