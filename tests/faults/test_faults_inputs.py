"""The reliability promise for what the user feeds in: wrong input stops the run with one clear
line, never a silently wrong result.

Each test is a fault that once passed unnoticed, run for real (tiny models, real files, a second
process where the exit status matters):

Ids out of range (XLA's gather clamps them instead of failing)
  1. a sentence-pair task on a model with `type_vocab_size: 1` is refused before training;
  2. pre-training records with ids past the vocabulary (or negative) fail in the input pipeline,
     naming the file;
  3. the serving signatures refuse ids past the vocabulary, negative ids, type ids past
     `type_vocab_size` and sequences longer than their `max_seq_length`, with `InvalidArgument`
     naming the input;
Skipped rows counted honestly
  4. a stray quote in a CSV file counts every row it swallows (or names the line it began on);
     in SWAG's one-row-per-line CSV a field running over lines is an error;
One line and exit status 2 for every error in the input
  5. absl's flag errors, a damaged or mismatched `model.weights.h5`, a broken Hugging Face
     `config.json` through `export_saved_model.py`;
  6. NaN or Infinity in a config, `--use_tpu` with another strategy, a batch that gradient
     accumulation cannot split, a SQuAD file of empty contexts, or v2.0 by other signs; a SWAG
     file's missing ending column, float labels of a classification;
A documented feature on a fresh install
  7. TensorFlow Datasets, imported for real, prepares a dataset locally and the package reads it.
"""

import json
import textwrap

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertClassifier, BertConfig
from official_bert.checkpoints import load_model_dir, save_model_dir
from official_bert.cli import engine_flags, launch
from official_bert.common import tfrecord_errors
from official_bert.common.errors import UserError
from official_bert.data import custom_data, squad, swag, tfds_data
from official_bert.export import export_classifier
from official_bert.pretraining.reader import pretraining_dataset
from official_bert.tasks import classification, driver
from official_bert.tasks.base import Modes
from official_bert.tasks.experiment import ExperimentConfig, PretrainingConfig, TrainerConfig
from official_bert.tasks.pretraining import PretrainingTask

from testing import (
  SPECIAL_TOKENS,
  assert_one_line_error,
  engine_configs,
  run_task,
  run_tools,
  tiny_bert_config,
  write_vocab,
)

ENGINE = dict(enable_xla=True, seed=0, steps_per_loop=10, log_steps=10)


def _config(**changes):
  return tiny_bert_config(**dict(dict(vocab_size=40, num_hidden_layers=1,
                                      max_position_embeddings=64), **changes))


def _vocab(path, words=("a", "b", "good", "bad")):
  return write_vocab(path, SPECIAL_TOKENS + list(words))


# === 1-3. Ids out of range ===


def test_a_sentence_pair_task_on_a_one_type_model_is_refused_before_training(tmp_path):
  mrpc = tmp_path / "MRPC"
  mrpc.mkdir()
  (mrpc / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(
      f"{i % 2}\t{i}\t{i + 1}\tgood a\tbad b\n" for i in range(8)))
  config_file = tmp_path / "bert_config.json"
  _config(type_vocab_size=1).to_json_file(config_file)
  output_dir = tmp_path / "out"
  with pytest.raises(UserError, match=r"sentence pairs of MRPC need type ids 0 to 1, but the "
                     r"model's type_vocab_size is 1"):
    run_task(classification.ClassificationTask,
             config=ExperimentConfig(output_dir=str(output_dir),
                                     **engine_configs(train_batch_size=4, **ENGINE)),
             bert_config_file=str(config_file), vocab_file=_vocab(tmp_path / "vocab.txt"),
             task_name="MRPC", data_dir=str(mrpc), max_seq_length=16, do_train=True)
  assert not output_dir.exists()  # refused before any work


def _pretraining_records(path, input_ids, segment_ids=0, seq_length=8, predictions=2):
  """Writes TFRecords of the original pre-training features, one per row of `input_ids`."""
  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  with tf.io.TFRecordWriter(str(path)) as writer:
    for ids in input_ids:
      ids = list(ids) + [0] * (seq_length - len(ids))
      feature = {"input_ids": ints(ids), "input_mask": ints([1] * seq_length),
                 "segment_ids": ints([segment_ids] * seq_length),
                 "masked_lm_positions": ints([1] + [0] * (predictions - 1)),
                 "masked_lm_ids": ints([5] + [0] * (predictions - 1)),
                 "next_sentence_labels": ints([0])}
      feature["masked_lm_weights"] = tf.train.Feature(
          float_list=tf.train.FloatList(value=[1.0] + [0.0] * (predictions - 1)))
      writer.write(tf.train.Example(features=tf.train.Features(feature=feature))
                   .SerializeToString())
  return str(path)


def _read_all(pattern, **limits):
  with tfrecord_errors.naming_damaged_tfrecords():
    for _ in pretraining_dataset(pattern, 8, 2, batch_size=2, is_training=False, **limits):
      pass


@pytest.fixture(scope="module")
def good_records(tmp_path_factory):
  """Records of ids in range, which the reader reads through; written and read once."""
  good = _pretraining_records(tmp_path_factory.mktemp("good") / "good.tfrecord", [[2, 5, 3]] * 3)
  _read_all(good, vocab_size=40, type_vocab_size=2)
  return good


@pytest.mark.parametrize("bad, feature", [
    (dict(input_ids=[[2, 40, 3]]), "input_ids holds 40, outside [0, 40) (vocab_size)"),
    (dict(input_ids=[[2, -3, 3]]), "input_ids holds -3, outside [0, 40)"),
    (dict(input_ids=[[2, 5, 3]], segment_ids=2), "segment_ids holds 2, outside [0, 2) "
     "(type_vocab_size)"),
])
def test_pretraining_records_out_of_range_fail_naming_the_file(good_records, tmp_path, bad,
                                                              feature):
  good = good_records
  damaged = _pretraining_records(tmp_path / "damaged.tfrecord", **bad)
  with pytest.raises(tfrecord_errors.RecordValueError) as error:
    _read_all(f"{good},{damaged}", vocab_size=40, type_vocab_size=2)
  assert str(error.value).startswith(f"{damaged}: a record's {feature}")
  assert launch.is_user_error(error.value)


@pytest.mark.slow
def test_pretraining_on_records_past_the_vocabulary_stops_naming_the_file(tmp_path):
  """The whole run, with XLA: before, it trained and evaluated with exit status 0."""
  records = _pretraining_records(tmp_path / "records.tfrecord", [[2, 5, 3], [2, 40, 3]] * 4)
  task = PretrainingTask(PretrainingConfig(input_file=records, max_seq_length=8,
                                           max_predictions_per_seq=2), _config())
  config = ExperimentConfig(output_dir=str(tmp_path / "out"),
                            **engine_configs(train_batch_size=4, num_train_steps=2,
                                             num_warmup_steps=0, **ENGINE))
  with pytest.raises(tfrecord_errors.RecordValueError,
                     match=f"^{records}: a record's input_ids holds 40, outside"):
    driver.run(task, config, Modes(train=True, eval=True))
  assert not (tmp_path / "out" / "model.json").exists()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
  """A tiny classifier exported with XLA (the default), loaded back."""
  import tensorflow_text  # noqa: F401  (registers the tokenizer's ops for loading)
  directory = tmp_path_factory.mktemp("served")
  model = BertClassifier(_config(), 2)
  export_classifier(model, str(directory / "export"), vocab_file=_vocab(directory / "vocab.txt"),
                    do_lower_case=True, max_seq_length=32, jit_compile=True)
  return tf.saved_model.load(str(directory / "export"))


def _serve_ids(served, word_ids, type_ids=None):
  word_ids = tf.constant([word_ids], tf.int32)
  type_ids = tf.zeros_like(word_ids) if type_ids is None else tf.constant([type_ids], tf.int32)
  return served.signatures["serve_token_ids"](
      input_word_ids=word_ids, input_mask=tf.ones_like(word_ids), input_type_ids=type_ids)


@pytest.mark.parametrize("word_ids, type_ids, message", [
    ([2, 1_000_000, 3], None, "input_word_ids holds an id >= vocab_size 40 of the model"),
    ([2, -7, 3], None, "input_word_ids holds a negative id"),
    ([2, 5, 3], [0, 9, 0], "input_type_ids holds an id >= type_vocab_size 2 of the model"),
    ([2, 5, 3], [0, -1, 0], "input_type_ids holds a negative id"),
    ([2] + [5] * 98 + [3], None, "input_word_ids has more positions than the max_seq_length "
     "of the signature, 32"),
])
def test_serve_token_ids_refuses_ids_and_lengths_out_of_range(served, word_ids, type_ids,
                                                              message):
  assert _serve_ids(served, [2, 5, 3])["label"].numpy()[0] in (b"0", b"1")
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    _serve_ids(served, word_ids, type_ids)


@pytest.mark.parametrize("mask, message", [
    ([1, 2, 1], "input_mask must be 0 or 1, holds > 1"),
    ([1, -1, 1], "input_mask must be 0 or 1, holds < 0"),
    ([0, 1, 1], "input_mask has a 1 after a 0: padding goes on the right"),
])
def test_serve_token_ids_refuses_a_mask_that_is_not_ones_then_zeros(served, mask, message):
  word_ids = tf.constant([[2, 5, 3]], tf.int32)
  serve = served.signatures["serve_token_ids"]
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    serve(input_word_ids=word_ids, input_mask=tf.constant([mask], tf.int32),
          input_type_ids=tf.zeros_like(word_ids))
  assert _serve_ids(served, [2, 5, 3])["label"].numpy()[0] in (b"0", b"1")


@pytest.mark.parametrize("signature, inputs, message", [
    ("serving_default", {"text": tf.constant("the room")}, "tensor text"),
    ("serving_default", {"text": tf.constant([["the room"]])}, "tensor text"),
    ("serving_default", {"text": tf.constant([[["the room"]]])}, "tensor text"),
    ("serve_examples", {"examples": tf.constant(b"")}, "tensor examples"),
    ("serve_token_ids", {"input_word_ids": tf.constant([2, 5, 3]),
                         "input_mask": tf.constant([[1, 1, 1]]),
                         "input_type_ids": tf.constant([[0, 0, 0]])}, "tensor input_word_ids"),
    ("serve_token_ids", {"input_word_ids": tf.constant([[2, 5, 3]]),
                         "input_mask": tf.constant([[1, 1, 1]]),
                         "input_type_ids": tf.constant([[0, 0, 0], [0, 0, 0]])},
     "input_type_ids must have"),
])
def test_a_request_of_the_wrong_rank_or_shape_is_refused_and_serving_goes_on(
    served, signature, inputs, message):
  # Such a request used to reach the tokenizer's kernels and kill the process (SIGSEGV).
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    served.signatures[signature](**inputs)
  answer = served.signatures["serving_default"](text=tf.constant(["the room", "a"]))
  assert answer["label"].shape == (2,)


def test_a_pair_of_texts_must_have_one_batch_size(tmp_path):
  import tensorflow_text  # noqa: F401  (registers the tokenizer's ops for loading)
  export_classifier(BertClassifier(_config(), 2), str(tmp_path / "export"),
                    vocab_file=_vocab(tmp_path / "vocab.txt"), do_lower_case=True,
                    max_seq_length=16, sentence_pair=True, jit_compile=False)
  serve = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match="text_b must have as many rows as text_a"):
    serve(text_a=tf.constant(["a", "b"]), text_b=tf.constant(["c"]))
  assert serve(text_a=tf.constant(["a"]), text_b=tf.constant(["c"]))["label"].shape == (1,)


def test_serve_examples_refuses_ids_out_of_range(served):
  def example(ids):
    padding = [0] * (32 - len(ids))
    values = {"input_ids": ids + padding, "input_mask": [1] * len(ids) + padding,
              "segment_ids": [0] * 32}
    return tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=value))
        for name, value in values.items()})).SerializeToString()

  serve = served.signatures["serve_examples"]
  assert serve(examples=tf.constant([example([2, 5, 3])]))["label"].shape == (1,)
  with pytest.raises(tf.errors.InvalidArgumentError, match="input_ids holds an id >= "
                     "vocab_size 40 of the model"):
    serve(examples=tf.constant([example([2, 2**32 + 5, 3])]))  # int32 would wrap it to 5


# === 4. Skipped rows counted honestly ===


def _custom_csv(folder, rows, stray_row):
  folder.mkdir()
  lines = [f"{'good a' if i % 2 else 'bad b'} {i},{i % 2}" for i in range(rows)]
  lines[stray_row] = '"' + lines[stray_row]  # a quote that is never closed
  (folder / "train.csv").write_text("text,label\n" + "\n".join(lines) + "\n")
  return folder


def test_a_stray_quote_counts_every_row_it_swallows(tmp_path, caplog):
  folder = _custom_csv(tmp_path / "data", rows=48, stray_row=9)  # row 10, on line 11
  with pytest.raises(UserError, match=r"train.csv:11: expected 2 fields like the header, found "
                     r"1; a quoted field begins on this line and runs to line 49"):
    custom_data.CustomProcessor(str(folder), "text", "label").get_train_examples()
  processor = custom_data.CustomProcessor(str(folder), "text", "label", skip_malformed_rows=True)
  assert len(processor.get_train_examples()) == 9
  assert processor.skipped_rows[str(folder / "train.csv")] == 39  # 9 + 39 = 48 rows
  # A stray quote closed further down merges rows into one well-formed row: valid CSV, but said.
  merged = tmp_path / "merged"
  merged.mkdir()
  (merged / "train.csv").write_text('text,label\n"good a,1\nbad b,0\ngood" a,1\nbad b,0\n')
  caplog.clear()
  examples = custom_data.CustomProcessor(str(merged), "text", "label").get_train_examples()
  assert len(examples) == 2
  assert "train.csv: 1 row(s) run over several lines (a quoted field with line breaks), the " \
      "first from line 2 to 4; if that is not meant, look for a stray '\"'" in caplog.text


def test_a_swag_field_running_over_lines_is_an_error_naming_where_it_began(tmp_path):
  header = "fold-ind,sent1,sent2,ending0,ending1,label\n"
  rows = [f"{i},A man waves.,He,sits.,runs.,{i % 2}\n" for i in range(10)]
  rows[3] = '3,"A man waves.,He,sits.,runs.,1\n'
  path = tmp_path / "train.csv"
  path.write_text(header + "".join(rows))
  with pytest.raises(ValueError, match=r"train.csv:5: a quoted field begins on this line and runs "
                     r"over 7 lines, to line 11"):
    swag.read_swag_csv(str(path))
  rows[3] = '3,"A man\nwaves.",He,sits.,runs.,1\n'  # a line break or two is text
  path.write_text(header + "".join(rows))
  assert swag.read_swag_csv(str(path))[3].context == "A man\nwaves."


# === 5. The tools: one line, exit status 2 ===


_FLAG_ERRORS = {
    "unknown": (["--unknown_flag=1"], ["Unknown command line flag 'unknown_flag'"]),
    "not_a_boolean": (["--do_train=flase"], ["flag --do_train=flase: 'flase' is not a boolean"]),
    "stray_argument": (["stray"], ["unexpected argument(s) stray"]),
    "missing": ([], ["Flag --output_dir must have a value other than None"]),
    "export_format_without_export_dir": (["--export_format=onnx"],
                                         ["--export_format and --export_precision need "
                                          "--export_dir"]),
    "int8_saved_model": (["--export_dir=served", "--export_precision=int8"],
                         ["--export_precision=int8 is for --export_format=litert|onnx"]),
    "calibration_without_static_int8": (["--export_dir=served.onnx", "--export_format=onnx",
                                         "--export_precision=int8", "--calibration_file=c.txt"],
                                        ["--calibration_file is for the openvino format "
                                         "in int8"]),
}


def _broken_folders(directory):
  """A model folder whose weights file is cut short, and a Hugging Face folder whose config is
  not JSON: (model folder, its weights file, the Hugging Face folder)."""
  model_dir = directory / "model"
  save_model_dir(BertClassifier(_config(), 2), model_dir,
                 vocab_file=_vocab(directory / "vocab.txt"), do_lower_case=True,
                 max_seq_length=16)
  weights = model_dir / "model.weights.h5"
  weights.write_bytes(weights.read_bytes()[:1000])
  hf = directory / "hf"
  hf.mkdir()
  (hf / "config.json").write_text('{"model_type": "bert", "vocab_size": 40,, }')
  (hf / "model.safetensors").write_bytes(b"")
  _vocab(hf / "vocab.txt")
  return model_dir, weights, hf


@pytest.fixture(scope="module")
def tool_errors(tmp_path_factory):
  """`run_classifier.py` on each command line of `_FLAG_ERRORS`, then `export_saved_model.py` on
  two broken folders, all in one process (`run_tools`: absl parses each as the script would;
  `export_saved_model.py` runs alone in test_export.py)."""
  directory = tmp_path_factory.mktemp("flag_errors")
  commands = []
  for args, _ in _FLAG_ERRORS.values():
    given = ["--bert_config_file=c.json", "--vocab_file=v.txt", f"--output_dir={directory}/out"]
    if not args:  # the missing required flag
      given = given[:2]
    commands.append(["run_classifier.py", *given, *args])
  model_dir, weights, hf = _broken_folders(directory)
  commands += [
      ["export_saved_model.py", f"--model_dir={model_dir}", f"--export_dir={directory / 'e1'}"],
      ["export_saved_model.py", f"--model_dir={hf}", "--do_lower_case",
       f"--export_dir={directory / 'e2'}"]]
  results = run_tools(commands, directory)
  return {"flags": dict(zip(_FLAG_ERRORS, results)), "export": results[len(_FLAG_ERRORS):],
          "weights": weights, "hf": hf}


@pytest.mark.parametrize("case", _FLAG_ERRORS)
def test_a_flag_error_is_one_line_with_exit_status_2(tool_errors, case):
  assert_one_line_error(tool_errors["flags"][case], *_FLAG_ERRORS[case][1])


@pytest.fixture
def model_dir(tmp_path):
  path = tmp_path / "model"
  save_model_dir(BertClassifier(_config(), 2), path, vocab_file=_vocab(tmp_path / "vocab.txt"),
                 do_lower_case=True, max_seq_length=16)
  return path


def test_a_damaged_or_mismatched_weights_file_is_the_users_error(model_dir):
  manifest = json.loads((model_dir / "model.json").read_text())
  manifest["model_config"]["num_classes"] = 3
  (model_dir / "model.json").write_text(json.dumps(manifest))
  with pytest.raises(UserError, match=r"model.weights.h5: does not fit the classifier model that "
                     r"model.json describes .*\"num_classes\": 3"):
    load_model_dir(model_dir)
  manifest["model_config"]["num_classes"] = 2
  (model_dir / "model.json").write_text(json.dumps(manifest))
  weights = model_dir / "model.weights.h5"
  weights.write_bytes(weights.read_bytes()[:weights.stat().st_size // 2])
  with pytest.raises(UserError, match=r"model.weights.h5: cannot be read as Keras weights .*"
                     "truncated"):
    load_model_dir(model_dir)


def test_export_of_a_broken_folder_is_one_line_with_exit_status_2(tool_errors):
  broken, bad_json = tool_errors["export"]
  assert_one_line_error(broken, f"{tool_errors['weights']}: cannot be read as Keras weights")
  assert_one_line_error(bad_json,
                        f"{tool_errors['hf'] / 'config.json'}: not valid JSON at line 1, column 41")


# === 6. Messages of the library ===


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_nan_or_infinity_in_a_config_is_refused_when_read(tmp_path, value):
  path = tmp_path / "bert_config.json"
  text = json.dumps(_config().to_dict()).replace('"initializer_range": 0.02',
                                                 f'"initializer_range": {value}')
  path.write_text(text)
  with pytest.raises(UserError, match=r"bert_config.json: BertConfig.initializer_range must be a "
                     r"finite non-negative number"):
    BertConfig.from_json_file(str(path))


def test_use_tpu_with_another_strategy_is_refused():
  flag_values = flags.FlagValues()
  engine_flags.define_engine_flags(flag_values)
  engine_flags.define_tpu_flags(flag_values)
  flag_values(["tool", "--use_tpu", "--distribution_strategy=mirrored"])
  with pytest.raises(UserError, match="--use_tpu selects the tpu strategy, but "
                     "--distribution_strategy=mirrored"):
    engine_flags.runtime_config_from_flags(flag_values)
  flag_values(["tool", "--use_tpu", "--distribution_strategy=tpu", "--tpu=local"])
  assert engine_flags.runtime_config_from_flags(flag_values).distribution_strategy == "tpu"


def test_a_batch_that_accumulation_cannot_split_is_refused_before_work(tmp_path):
  with pytest.raises(UserError, match="train_batch_size 30 does not split into "
                     "gradient_accumulation_steps=4 equal micro-batches"):
    TrainerConfig(train_batch_size=30, gradient_accumulation_steps=4)
  assert TrainerConfig(train_batch_size=32, gradient_accumulation_steps=4)


def _squad(path, paragraphs, version=None):
  data = {"data": [{"title": "t", "paragraphs": paragraphs}]}
  if version is not None:
    data["version"] = version
  path.write_text(json.dumps(data))
  return str(path)


def test_squad_files_of_empty_contexts_or_v2_by_other_signs_are_refused(tmp_path):
  empty = _squad(tmp_path / "empty.json", [{"context": " ", "qas": [
      {"id": "q1", "question": "who?", "answers": []}]}])
  with pytest.raises(squad.SquadFormatError, match=r"empty.json: article 0 \('t'\), paragraph 0: "
                     "the context is empty"):
    squad.read_squad_examples(empty, is_training=False)
  answered = {"id": "q1", "question": "who?", "answers": [{"text": "cat", "answer_start": 4}]}
  for name, paragraph, version, sign in [
      ("version.json", {"context": "the cat", "qas": [answered]}, "2.0",
       'declares "version": "2.0"'),
      ("unanswered.json", {"context": "the cat", "qas": [
          answered, {"id": "q2", "question": "why?", "answers": []}]}, None,
       r"has 1 question\(s\) with no answer beside answered ones")]:
    path = _squad(tmp_path / name, [paragraph], version)
    with pytest.raises(squad.SquadFormatError, match=f"{name} {sign}: it is SQuAD v2.0"):
      squad.read_squad_examples(path, is_training=False)
  # Questions to predict, none answered, say nothing of the version.
  unlabelled = _squad(tmp_path / "unlabelled.json", [{"context": "the cat", "qas": [
      {"id": "q1", "question": "who?", "answers": []}]}], "1.1")
  assert len(squad.read_squad_examples(unlabelled, is_training=False)[0]) == 1


def test_a_swag_file_missing_an_ending_column_names_it(tmp_path):
  path = tmp_path / "val.csv"
  path.write_text("sent1,sent2,ending0,ending1,ending3,label\nA.,B,c,d,e,0\n")
  with pytest.raises(ValueError, match=r"val.csv:1: no column\(s\) ending2: "):
    swag.read_swag_csv(str(path))


def test_float_labels_of_a_classification_suggest_regression(tmp_path):
  (tmp_path / "train.csv").write_text("text,score\na,0.5\nb,3.25\nc,1\n")
  processor = custom_data.CustomProcessor(str(tmp_path), "text", "score")
  with pytest.raises(UserError, match=r"label column 'score' holds numbers \(0.5, 1, 3.25, ...: "
                     r"3 distinct values\), not classes: for a score, pass --is_regression"):
    processor.get_labels()
  regression = custom_data.CustomProcessor(str(tmp_path), "text", "score", is_regression=True)
  assert [e.label for e in regression.get_train_examples()] == [0.5, 3.25, 1.0]


# === 7. TensorFlow Datasets, for real ===

# A dataset builder as a user's package would hold one: TFDS looks up the code of a builder in a
# package through `importlib_resources`, the dependency a clean install once lacked.
_TINY_GLUE = '''
import numpy as np
import tensorflow_datasets as tfds

_SST2 = [c for c in tfds.builder_cls("glue").BUILDER_CONFIGS if c.name == "sst2"][0]


class Glue(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """GLUE SST-2's features and folder layout, with a few rows of its own."""

  BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="sst2", version=_SST2.version)]

  def _info(self):
    return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
        "sentence": tfds.features.Text(),
        "label": tfds.features.ClassLabel(names=["negative", "positive"]),
        "idx": tfds.features.Scalar(dtype=np.int32)}))

  def _split_generators(self, dl_manager):
    return {"train": self._generate_examples(6), "validation": self._generate_examples(2)}

  def _generate_examples(self, count):
    for i in range(count):
      yield i, {"sentence": f"sentence {i}", "label": i % 2, "idx": i}
'''


def test_tfds_prepares_a_local_dataset_that_the_package_reads(tmp_path, monkeypatch):
  package = tmp_path / "tiny_glue_datasets"
  package.mkdir()
  (package / "__init__.py").write_text("")
  (package / "sst2.py").write_text(textwrap.dedent(_TINY_GLUE))
  monkeypatch.syspath_prepend(str(tmp_path))
  from tiny_glue_datasets.sst2 import Glue  # pylint: disable=import-error

  data_dir = tmp_path / "tensorflow_datasets"
  Glue(data_dir=str(data_dir), config="sst2").download_and_prepare()
  processor = tfds_data.TfdsProcessor("glue/sst2", data_dir=str(data_dir))
  train = sorted(processor.get_train_examples(), key=lambda e: e.guid)
  assert [(e.guid, e.text_a, e.label) for e in train[:2]] == [
      ("train-0", "sentence 0", "0"), ("train-1", "sentence 1", "1")]
  assert len(train) == 6 and len(processor.get_dev_examples()) == 2
  assert np.all([example.text_b is None for example in train])
