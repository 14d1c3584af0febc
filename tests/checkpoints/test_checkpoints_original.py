"""Checkpoints of the original google-research/bert, written here by TensorFlow's own v1 `Saver`:
as `init_checkpoint` and as the newest checkpoint of `output_dir`, with their fine-tuning heads
(`run_classifier.py`'s `output_weights`, `run_squad.py`'s `cls/squad/...`), checked against a
forward pass computed here in numpy; resuming at their step with their Adam moments; conversion
both ways; and an output folder whose checkpoint fits no known layout."""

import json
import shutil

from absl import flags
import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertClassifier, BertSpanLabeler
from official_bert.checkpoints import convert, load_model_dir, restore_task_weights, resume
from official_bert.cli import convert_checkpoint
from official_bert.tasks import classification, question_answering
from official_bert.tasks.experiment import ExperimentConfig
from official_bert.training import create_optimizer

from testing import SPECIAL_TOKENS, engine_configs, original_variables, run_task, tiny_bert_config

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "in", "park", "where", "did", "what",
         "who", "saw", "big", "small", "red", "."]
VOCAB = SPECIAL_TOKENS + WORDS
HEADS = 2
# "gelu_new" is the tanh form of GELU, the one the original TF1 code computes and `_gelu` below.
CONFIG = tiny_bert_config(len(VOCAB), num_attention_heads=HEADS, max_position_embeddings=32,
                          hidden_act="gelu_new")
SEQ = 16
ENGINE = dict(enable_xla=False, seed=0, steps_per_loop=2, log_steps=2, save_checkpoints_steps=2)
SENTENCES = ["the cat sat on the mat .", "a dog ran in the park", "the big red dog saw a cat",
             "who sat on the small mat", "a cat", "the dog saw the park ."]
SQUAD_POOLER = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


# === Original checkpoints, written as the original code wrote them ===

def original_weights(num_labels=None, squad=False, seed=0):
  """Encoder values under the original names, plus a classifier's or SQuAD's output layer."""
  rng = np.random.default_rng(seed)
  weights = {name: (1.0 + 0.1 * value if name.endswith("gamma") else 0.2 * value)
             for name, value in original_variables(CONFIG, heads=False, seed=seed).items()}
  scope = "cls/squad/" if squad else ""
  if squad or num_labels:
    rows = 2 if squad else num_labels
    weights[f"{scope}output_weights"] = rng.normal(0, 0.5, (rows, CONFIG.hidden_size))
    weights[f"{scope}output_bias"] = rng.normal(0, 0.5, (rows,))
  return {name: value.astype(np.float32) for name, value in weights.items()}


def write_original(folder, weights, step, without_moments=(), seed=1):
  """Saves `weights` as the original Estimator did: TF1 graph variables under their names, the
  Adam moments `<name>/adam_m` and `<name>/adam_v` (none for `without_moments`, which had no
  gradient), `global_step`, and a `checkpoint` state file, all by a v1 `Saver`.

  Returns:
    `(prefix, moments)`: `folder/model.ckpt-<step>` and `{moment name: value}`.
  """
  rng = np.random.default_rng(seed)
  moments = {}
  with tf.Graph().as_default():
    for name, value in weights.items():
      tf.compat.v1.get_variable(name, initializer=tf.constant(value))
      if name in without_moments:
        continue
      for slot in ("adam_m", "adam_v"):
        moments[f"{name}/{slot}"] = rng.random(value.shape).astype(np.float32)
        tf.compat.v1.get_variable(f"{name}/{slot}", initializer=tf.constant(
            moments[f"{name}/{slot}"]), trainable=False)
    tf.compat.v1.get_variable("global_step", initializer=tf.constant(step, tf.int64),
                              trainable=False)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      prefix = tf.compat.v1.train.Saver().save(session, str(folder / "model.ckpt"),
                                               global_step=step)
  return prefix, moments


# === The original forward pass, in numpy ===

def _layer_norm(x, weights, scope):
  mean = x.mean(-1, keepdims=True)
  variance = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(variance + 1e-12) * weights[f"{scope}/gamma"] + weights[
      f"{scope}/beta"]


def _gelu(x):
  return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def reference_forward(weights, ids, mask, segments):
  """The original `modeling.py` in float64: `(sequence_output, pooled_output)`."""
  w = {name: value.astype(np.float64) for name, value in weights.items()}
  batch, seq = ids.shape
  size = CONFIG.hidden_size // HEADS
  x = (w["bert/embeddings/word_embeddings"][ids] + w["bert/embeddings/position_embeddings"][:seq]
       + w["bert/embeddings/token_type_embeddings"][segments])
  x = _layer_norm(x, w, "bert/embeddings/LayerNorm")
  padding = (1.0 - mask[:, None, None, :]) * -10000.0
  for layer in range(CONFIG.num_hidden_layers):
    scope = f"bert/encoder/layer_{layer}"

    def dense(h, name, scope=scope):
      return h @ w[f"{scope}/{name}/kernel"] + w[f"{scope}/{name}/bias"]

    def split(h):
      return h.reshape(batch, seq, HEADS, size).transpose(0, 2, 1, 3)

    q, k, v = (split(dense(x, f"attention/self/{part}")) for part in ("query", "key", "value"))
    probs = _softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(size) + padding)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, -1)
    x = _layer_norm(dense(context, "attention/output/dense") + x, w,
                    f"{scope}/attention/output/LayerNorm")
    x = _layer_norm(dense(_gelu(dense(x, "intermediate/dense")), "output/dense") + x, w,
                    f"{scope}/output/LayerNorm")
  pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
  return x, pooled


def _records(path, names):
  sequences = ("input_ids", "input_mask", "segment_ids")
  spec = {name: tf.io.FixedLenFeature([SEQ] if name in sequences else [], tf.int64)
          for name in names}
  rows = [tf.io.parse_single_example(record, spec)
          for record in tf.data.TFRecordDataset(str(path))]
  return {name: np.stack([row[name].numpy() for row in rows]) for name in names}


# === Fixtures ===

@pytest.fixture(name="files", scope="module")
def fixture_files(tmp_path_factory):
  """vocab.txt, bert_config.json, an SST-2 folder and a SQuAD v1.1 file to predict."""
  folder = tmp_path_factory.mktemp("files")
  (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
  CONFIG.to_json_file(str(folder / "bert_config.json"))
  sst = folder / "SST-2"
  sst.mkdir()
  rows = [f"{sentence}\t{i % 2}" for i, sentence in enumerate(SENTENCES * 3)]
  (sst / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows[:16]) + "\n")
  (sst / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows[:6]) + "\n")
  (sst / "test.tsv").write_text("index\tsentence\n" + "".join(
      f"{i}\t{sentence}\n" for i, sentence in enumerate(SENTENCES)))
  contexts = ["the cat sat on the mat .", "a big dog ran in the park .", "the small cat saw a dog"]
  questions = [("who sat on the mat", "cat"), ("where did the dog run", "park"),
               ("what did the cat see", "dog")]
  data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": context, "qas": [{"id": f"q{i}", "question": question, "answers": [
          {"text": answer, "answer_start": context.index(answer)}]}]}
      for i, (context, (question, answer)) in enumerate(zip(contexts, questions))]}]}
  (folder / "squad.json").write_text(json.dumps(data))
  return folder


@pytest.fixture(name="classifier_original", scope="module")
def fixture_classifier_original(tmp_path_factory):
  """A fine-tuned classifier's output folder at step 7, and its weights; the tests copy or read
  it, never write into it."""
  weights = original_weights(num_labels=2)
  folder = tmp_path_factory.mktemp("classifier_original")
  write_original(folder, weights, step=7)
  return folder, weights


@pytest.fixture(name="squad_original", scope="module")
def fixture_squad_original(tmp_path_factory):
  """A fine-tuned SQuAD model's output folder at step 11 (its pooler without moments, unused by
  the span head), and its weights; the tests copy or read it, never write into it."""
  weights = original_weights(squad=True)
  folder = tmp_path_factory.mktemp("squad_original")
  write_original(folder, weights, step=11, without_moments=SQUAD_POOLER)
  return folder, weights


def _run(task_class, files, output_dir, init_checkpoint=None, **options):
  config = ExperimentConfig(output_dir=str(output_dir), init_checkpoint=init_checkpoint,
                            **engine_configs(train_batch_size=8, eval_batch_size=4,
                                             predict_batch_size=4, learning_rate=1e-3,
                                             num_train_epochs=3.0, **ENGINE))
  return run_task(task_class, config=config, bert_config_file=str(files / "bert_config.json"),
                  vocab_file=str(files / "vocab.txt"), max_seq_length=SEQ, **options)


def _place(original, output_dir, source):
  """`init_checkpoint` for the run, after copying the original output folder where `source` says."""
  if source == "output_dir":
    shutil.copytree(original, output_dir)
    return None
  return tf.train.latest_checkpoint(str(original))


def _convert_script(*args):
  """`bert-convert-checkpoint` with these flags."""
  flag_values = flags.FlagValues()
  convert_checkpoint.define_flags(flag_values)
  flag_values(["bert-convert-checkpoint", *args])
  return convert_checkpoint.convert_from_flags(flag_values)


# === Tests ===

@pytest.mark.parametrize("source", ["init_checkpoint", "output_dir"])
def test_original_classifier_predicts_as_the_original_forward_pass(files, classifier_original,
                                                                   tmp_path, source, caplog):
  original, weights = classifier_original
  output_dir = tmp_path / "out"
  init_checkpoint = _place(original, output_dir, source)
  results = _run(classification.ClassificationTask, files, output_dir, init_checkpoint,
                 task_name="SST-2", data_dir=str(files / "SST-2"), do_eval=True, do_predict=True)
  assert results["global_step"] == (7 if source == "output_dir" else 0)
  assert "untrained" not in caplog.text  # the head is the fine-tuned one, from either source

  features = _records(output_dir / "predict.tf_record",
                      ("input_ids", "input_mask", "segment_ids", "is_real_example"))
  real = features["is_real_example"] == 1
  assert real.sum() == len(SENTENCES)
  _, pooled = reference_forward(weights, features["input_ids"][real],
                                features["input_mask"][real], features["segment_ids"][real])
  logits = pooled @ weights["output_weights"].T.astype(np.float64) + weights["output_bias"]
  probabilities = np.loadtxt(output_dir / "test_results.tsv", delimiter="\t")
  np.testing.assert_allclose(probabilities, _softmax(logits), atol=1e-5)
  np.testing.assert_allclose(np.log(probabilities[:, 1] / probabilities[:, 0]),
                             logits[:, 1] - logits[:, 0], atol=1e-5)


@pytest.mark.parametrize("source", ["init_checkpoint", "output_dir"])
def test_original_squad_model_predicts_as_the_original_forward_pass(files, squad_original,
                                                                   tmp_path, source):
  original, weights = squad_original
  output_dir = tmp_path / "out"
  init_checkpoint = _place(original, output_dir, source)
  max_answer_length = 30
  _run(question_answering.SquadTask, files, output_dir, init_checkpoint,
       predict_file=str(files / "squad.json"), max_query_length=6, doc_stride=8, n_best_size=SEQ,
       max_answer_length=max_answer_length, do_predict=True)

  features = _records(output_dir / "eval.tf_record",
                      ("unique_ids", "input_ids", "input_mask", "segment_ids"))
  assert len(features["unique_ids"]) == 3  # one window per question
  sequence, _ = reference_forward(weights, features["input_ids"], features["input_mask"],
                                  features["segment_ids"])
  logits = sequence @ weights["cls/squad/output_weights"].T.astype(np.float64) + weights[
      "cls/squad/output_bias"]
  nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
  for row, question in enumerate(["q0", "q1", "q2"]):
    start, end = logits[row, :, 0], logits[row, :, 1]
    context = np.flatnonzero((features["segment_ids"][row] == 1)
                             & (features["input_mask"][row] == 1))[:-1]  # without the last [SEP]
    best = max((start[i] + end[j], i, j) for i in context for j in context
               if i <= j < i + max_answer_length)
    top = nbest[question][0]
    assert top["start_logit"] == pytest.approx(start[best[1]], abs=1e-5)
    assert top["end_logit"] == pytest.approx(end[best[2]], abs=1e-5)
    for entry in nbest[question]:
      assert np.min(np.abs(start[context] - entry["start_logit"])) < 1e-5
      assert np.min(np.abs(end[context] - entry["end_logit"])) < 1e-5


@pytest.mark.slow  # a resumed training run of the driver; the restore is unit-tested below
def test_training_resumes_an_original_output_dir_at_its_global_step(files, tmp_path):
  write_original(tmp_path, original_weights(num_labels=2), step=3)
  results = _run(classification.ClassificationTask, files, tmp_path, task_name="SST-2",
                 data_dir=str(files / "SST-2"), do_train=True, do_eval=True)
  # 16 examples in batches of 8 for 3 epochs: 6 steps; from step 3, checkpoints at 4 and 6 only.
  assert results["global_step"] == 6
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("/ckpt-6")
  assert (tmp_path / "ckpt-4.index").exists() and not (tmp_path / "ckpt-2.index").exists()
  assert json.loads((tmp_path / "model.json").read_text())["kind"] == "classifier"


def test_resume_loads_weights_step_and_adam_moments(tmp_path):
  weights = original_weights(squad=True)
  prefix, moments = write_original(tmp_path, weights, step=5, without_moments=SQUAD_POOLER)
  model = BertSpanLabeler(CONFIG)
  optimizer = create_optimizer("adamw", 1e-3, num_train_steps=10, num_warmup_steps=1)
  optimizer.build(model.trainable_variables)
  assert resume.checkpoint_layout(prefix) == resume.ORIGINAL
  assert resume.restore_original(model, optimizer, prefix) == 5
  assert int(optimizer.iterations.numpy()) == 5

  kernel = model.span_head.dense.kernel
  np.testing.assert_array_equal(kernel.numpy(), weights["cls/squad/output_weights"].T)
  m, v = optimizer.slots(kernel)
  np.testing.assert_array_equal(m.numpy(), moments["cls/squad/output_weights/adam_m"].T)
  np.testing.assert_array_equal(v.numpy(), moments["cls/squad/output_weights/adam_v"].T)
  qkv = model.encoder.transformer_layers[1].attention.qkv.kernel
  m, _ = optimizer.slots(qkv)
  np.testing.assert_array_equal(m.numpy(), np.concatenate(
      [moments[f"bert/encoder/layer_1/attention/self/{part}/kernel/adam_m"]
       for part in ("query", "key", "value")], axis=-1))
  for variable in (model.encoder.pooler.kernel, model.encoder.pooler.bias):
    assert not np.any(optimizer.slots(variable)[0].numpy())

  # Another optimizer has no moments like the original's: the weights load, the moments start
  # fresh.
  lamb_model = BertSpanLabeler(CONFIG)
  lamb = create_optimizer("lamb", 1e-3, num_train_steps=10, num_warmup_steps=1)
  lamb.build(lamb_model.trainable_variables)
  assert resume.restore_original(lamb_model, lamb, prefix) == 5
  np.testing.assert_array_equal(lamb_model.span_head.dense.kernel.numpy(), kernel.numpy())
  assert not any(np.any(variable.numpy()) for variable in lamb.variables
                 if variable is not lamb.iterations and "iteration" not in variable.path)


def test_init_checkpoint_takes_the_head_only_when_it_fits(tmp_path):
  weights = original_weights(num_labels=2)
  prefix, _ = write_original(tmp_path, weights, step=1)
  same = BertClassifier(CONFIG, num_classes=2)
  assert restore_task_weights(same, prefix) is True
  np.testing.assert_array_equal(same.classifier.dense.kernel.numpy(), weights["output_weights"].T)
  np.testing.assert_array_equal(same.encoder.pooler.bias.numpy(),
                                weights["bert/pooler/dense/bias"])

  # Another number of labels, or another task: the encoder loads, the head stays as it was.
  other, span = BertClassifier(CONFIG, num_classes=3), BertSpanLabeler(CONFIG)
  for model, head in ((other, other.classifier), (span, span.span_head)):
    fresh = [variable.numpy() for variable in head.weights]
    assert restore_task_weights(model, prefix) is False
    np.testing.assert_array_equal(model.encoder.pooler.bias.numpy(),
                                  weights["bert/pooler/dense/bias"])
    for before, variable in zip(fresh, head.weights, strict=True):
      np.testing.assert_array_equal(before, variable.numpy())

  # A model folder converted from it carries the head the same way.
  CONFIG.to_json_file(str(tmp_path / "bert_config.json"))
  convert("tf1", prefix, tmp_path / "folder")
  converted = BertClassifier(CONFIG, num_classes=2)
  assert restore_task_weights(converted, tmp_path / "folder") is True
  np.testing.assert_array_equal(converted.classifier.dense.bias.numpy(), weights["output_bias"])

  partial = dict(weights)
  del partial["output_bias"]
  prefix, _ = write_original(tmp_path / "partial", partial, step=1)
  with pytest.raises(ValueError, match="holds the classifier head only in part.*not output_bias"):
    restore_task_weights(BertClassifier(CONFIG, num_classes=2), prefix)


def test_fine_tuned_classifier_converts_to_a_model_folder_and_back(files, tmp_path):
  weights = original_weights(num_labels=3, seed=4)
  prefix, _ = write_original(tmp_path / "original", weights, step=9)
  _convert_script("--input_format=tf1", f"--input={prefix}", f"--output_dir={tmp_path / 'folder'}",
                  f"--bert_config_file={files / 'bert_config.json'}")
  model, info = load_model_dir(tmp_path / "folder")
  assert info.kind == "classifier" and model.num_classes == 3

  rng = np.random.default_rng(0)
  ids = rng.integers(5, len(VOCAB), size=(3, 10)).astype("int32")
  mask = np.ones_like(ids)
  mask[1, 6:] = 0
  segments = np.zeros_like(ids)
  segments[:, 5:] = 1
  logits = model({"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": segments},
                 training=False)["logits"]
  _, pooled = reference_forward(weights, ids * mask, mask, segments)
  np.testing.assert_allclose(logits, pooled @ weights["output_weights"].T.astype(np.float64)
                             + weights["output_bias"], atol=1e-5)

  _convert_script("--input_format=keras", f"--input={tmp_path / 'folder'}",
                  f"--output_dir={tmp_path / 'back'}", "--output_format=tf1")
  reader = tf.train.load_checkpoint(str(tmp_path / "back" / "bert_model.ckpt"))
  assert sorted(reader.get_variable_to_shape_map()) == sorted(weights)
  for name, value in weights.items():
    np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)
  with pytest.raises(ValueError, match="model folder already"):
    convert("keras", tmp_path / "folder", tmp_path / "again")
  with pytest.raises(ValueError, match="to another folder"):
    convert("keras", tmp_path / "folder", tmp_path / "folder", output_format="tf1")
  assert load_model_dir(tmp_path / "folder")[1].kind == "classifier"


def test_an_output_dir_checkpoint_of_no_known_layout_is_an_error(files, tmp_path):
  rng = np.random.default_rng(0)
  foreign = {"albert/embeddings/word_embeddings": rng.random((5, 4)).astype(np.float32)}
  write_original(tmp_path, foreign, step=3)
  with pytest.raises(ValueError, match=rf"{tmp_path} holds the checkpoint .*model\.ckpt-3, which "
                                       r"is neither .*albert/embeddings/word_embeddings"):
    _run(classification.ClassificationTask, files, tmp_path, task_name="SST-2",
         data_dir=str(files / "SST-2"), do_predict=True)
