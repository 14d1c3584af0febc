"""The training engine's loops on real pre-training records: learning, resuming, accumulating,
evaluating, predicting, mixed precision and the stop on a non-finite loss."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import shared_data
from official_bert import BertConfig, BertPretrainer
from official_bert.data import synthetic
from official_bert.models.losses import pretraining_losses
from official_bert.pretraining.instances import InstanceOptions
from official_bert.pretraining.pipeline import create_pretraining_data
from official_bert.pretraining.reader import pretraining_dataset
from official_bert.pretraining.task import pretraining_metrics
from official_bert.training import EngineConfig, NonFiniteLossError, Trainer, create_optimizer

SEQ, PREDICTIONS = 32, 5
RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# === Data: records written by the project's own create_pretraining_data ===

def write_corpus(directory, num_documents=60):
  """A generated corpus and a whole-word vocabulary for it; returns (corpus, vocab, vocab size)."""
  corpus, vocab = os.path.join(directory, "corpus.txt"), os.path.join(directory, "vocab.txt")
  synthetic.write_pretraining_corpus(corpus, num_documents=num_documents)
  with open(corpus, encoding="utf-8") as f:
    words = sorted({word for line in f for word in line.split()})
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("\n".join(RESERVED + words) + "\n")
  return corpus, vocab, len(RESERVED) + len(words)


def make_records(corpus, vocab, output, dupe_factor=2):
  stats = create_pretraining_data(
      corpus, output, vocab, num_workers=1, random_seed=1, options=InstanceOptions(
          max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, dupe_factor=dupe_factor))
  return stats.instances


def write_full_records(path, num_examples, vocab_size, seed=0, seq_length=SEQ):
  """Records in the original format with every prediction real (all `masked_lm_weights` 1).

  With equal weights each micro-batch's (each replica's) mean loss weighs the same, so the
  averaged gradient equals the whole batch's exactly: what accumulation and replicas promise.
  """
  rng = np.random.default_rng(seed)

  def ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

  with tf.io.TFRecordWriter(path) as writer:
    for _ in range(num_examples):
      ids = rng.integers(5, vocab_size, seq_length)
      positions = np.sort(rng.choice(np.arange(1, seq_length), PREDICTIONS, replace=False))
      features = {
          "input_ids": ints(ids), "input_mask": ints([1] * seq_length),
          "segment_ids": ints([0] * seq_length),
          "masked_lm_positions": ints(positions), "masked_lm_ids": ints(ids[positions]),
          "masked_lm_weights": tf.train.Feature(
              float_list=tf.train.FloatList(value=[1.0] * PREDICTIONS)),
          "next_sentence_labels": ints([rng.integers(0, 2)])}
      writer.write(tf.train.Example(
          features=tf.train.Features(feature=features)).SerializeToString())
  return path


def dataset_fn(files, batch_size, is_training=True, seq_length=SEQ, predictions=PREDICTIONS):
  return lambda input_context: pretraining_dataset(
      files, seq_length, predictions, batch_size, is_training, input_context=input_context,
      seed=1, shuffle_buffer_size=100)


def tiny_config(vocab_size, dropout=0.0, hidden=32):
  return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=2 * hidden,
                    max_position_embeddings=SEQ, hidden_dropout_prob=dropout,
                    attention_probs_dropout_prob=dropout)


def make_trainer(model_dir, config, engine, learning_rate=1e-3, num_steps=100, warmup=0,
                 initial_weights=None, optimizer=None, **kwargs):
  strategy = engine.setup()
  with strategy.scope():
    model = BertPretrainer(config)
    if initial_weights is not None:
      model.set_weights(initial_weights)
    optimizer = optimizer or create_optimizer(engine.optimizer_type, learning_rate, num_steps,
                                              warmup, dtype=engine.dtype)
  return Trainer(model, pretraining_losses, optimizer, strategy=strategy,
                 model_dir=str(model_dir), config=engine, metrics_fn=pretraining_metrics,
                 **kwargs)


def engine(**kwargs):
  values = dict(enable_xla=False, steps_per_loop=10, log_steps=10, save_checkpoints_steps=1000,
                deterministic=True, seed=1)
  return EngineConfig(**dict(values, **kwargs))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("records"))
  corpus, vocab, vocab_size = write_corpus(directory)
  path = os.path.join(directory, "train.tfrecord")
  assert make_records(corpus, vocab, path) >= 200
  return path, vocab_size


@pytest.fixture(autouse=True)
def float32_policy():
  yield
  keras.mixed_precision.set_global_policy("float32")


# === Learning ===

def overfit(tmp_path, files, vocab_size, steps):
  trainer = make_trainer(tmp_path / "run", tiny_config(vocab_size, hidden=64),
                         engine(steps_per_loop=steps, log_steps=steps), learning_rate=1e-3,
                         num_steps=steps, warmup=10)
  before = trainer.evaluate(dataset_fn(files, 64, is_training=False))
  trainer.train(dataset_fn(files, 32), steps)
  after = trainer.evaluate(dataset_fn(files, 64, is_training=False))
  return before, after


def test_a_small_model_overfits_generated_records(tmp_path, records):
  files, vocab_size = records
  before, after = overfit(tmp_path, files, vocab_size, steps=160)
  chance = 1.0 / vocab_size
  assert before["masked_lm_accuracy"] < 5 * chance + 0.05
  assert after["masked_lm_accuracy"] > 0.25, after  # 40 times chance
  assert after["masked_lm_loss"] < before["masked_lm_loss"] - 1.5


def test_a_small_model_overfits_real_text_with_the_uncased_vocab(tmp_path):
  text = shared_data("corpus/sample_text.txt")
  vocab = shared_data("vocab/bert-base-uncased-vocab.txt")
  files = str(tmp_path / "sample.tfrecord")
  assert make_records(str(text), str(vocab), files, dupe_factor=15) >= 200
  before, after = overfit(tmp_path, files, vocab_size=30522, steps=150)
  assert before["masked_lm_accuracy"] < 0.01
  assert after["masked_lm_accuracy"] > 0.1, after  # chance: 1 / 30522


# === Resuming ===

@pytest.mark.parametrize("data_checkpointing", ["iterator", "skip"])
def test_a_killed_run_resumes_to_the_same_weights(tmp_path, records, data_checkpointing):
  files, vocab_size = records
  config = tiny_config(vocab_size, dropout=0.1)  # dropout: the random state must resume too

  def run(directory, weights):
    return make_trainer(
        directory, config, engine(save_checkpoints_steps=4, steps_per_loop=4), num_steps=10,
        warmup=3, initial_weights=weights, data_checkpointing=data_checkpointing)

  initial = BertPretrainer(config).get_weights()

  uninterrupted = run(tmp_path / "straight", initial)
  uninterrupted.train(dataset_fn(files, 8), 10)

  killed = run(tmp_path / "killed", initial)

  def crash_in_step_6(outputs, labels):  # the process dies after the checkpoint of step 4
    with tf.control_dependencies([tf.debugging.assert_less(killed.global_step, np.int64(5))]):
      return pretraining_losses(outputs, labels)

  killed.loss_fn = crash_in_step_6
  with pytest.raises(tf.errors.InvalidArgumentError):
    killed.train(dataset_fn(files, 8), 10)
  assert killed.latest_checkpoint().endswith("ckpt-4")
  resumed = run(tmp_path / "killed", None)
  assert resumed.restore() == 4
  resumed.train(dataset_fn(files, 8), 10)

  for expected, actual in zip(uninterrupted.model.get_weights(), resumed.model.get_weights()):
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)
  assert resumed.train(dataset_fn(files, 8), 10) == {}  # already finished: nothing to do


# === Gradient accumulation ===

def test_accumulating_micro_batches_equals_one_large_batch(tmp_path):
  files = write_full_records(str(tmp_path / "full.tfrecord"), 64, vocab_size=50)
  config = tiny_config(50)
  initial = BertPretrainer(config).get_weights()
  weights, logs = [], []
  for steps in (1, 4):
    # SGD: its update is linear in the gradient, so float noise stays float noise (Adam's first
    # steps amplify it to the learning rate on near-zero gradients).
    trainer = make_trainer(tmp_path / f"accumulate{steps}", config,
                           engine(gradient_accumulation_steps=steps), initial_weights=initial,
                           optimizer=keras.optimizers.SGD(0.5))
    logs.append(trainer.train(dataset_fn(files, 16), 3))
    weights.append(trainer.model.get_weights())
  for full, accumulated in zip(*weights):
    np.testing.assert_allclose(accumulated, full, rtol=1e-4, atol=1e-6)
  assert logs[1]["loss"] == pytest.approx(logs[0]["loss"], rel=1e-5)
  assert not np.allclose(weights[0][0], initial[0])


def test_a_batch_that_does_not_split_into_micro_batches_is_an_error(tmp_path, records):
  files, vocab_size = records
  trainer = make_trainer(tmp_path, tiny_config(vocab_size), engine(gradient_accumulation_steps=3))
  with pytest.raises(ValueError, match="does not split into gradient_accumulation_steps=3"):
    trainer.train(dataset_fn(files, 8), 2)


# === A non-finite loss ===

def test_a_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, records):
  files, vocab_size = records
  trainer = make_trainer(tmp_path, tiny_config(vocab_size), engine(save_checkpoints_steps=2))

  def poisoned(outputs, labels):
    losses = pretraining_losses(outputs, labels)
    poison = tf.where(trainer.global_step >= 4, np.nan, 0.0)  # from the 5th step on
    return dict(losses, masked_lm_loss=losses["masked_lm_loss"] + poison,
                loss=losses["loss"] + poison)

  trainer.loss_fn = poisoned
  with pytest.raises(NonFiniteLossError) as error:
    trainer.train(dataset_fn(files, 8), 10)
  message = str(error.value)
  assert "step 5" in message and "masked_lm_loss" in message and "nan" in message
  assert "ckpt-4" in message
  assert trainer.latest_checkpoint().endswith("ckpt-4")
  assert not os.path.exists(os.path.join(tmp_path, "ckpt-5.index"))


# === Evaluation and prediction ===

def test_evaluate_counts_every_example_and_predict_keeps_their_order(tmp_path, records):
  files, vocab_size = records
  trainer = make_trainer(tmp_path, tiny_config(vocab_size), engine())
  num_examples = sum(1 for _ in tf.data.TFRecordDataset(files))
  batch = [b for b in range(24, 48) if num_examples % b != 0][0]  # the last batch is partial
  results = trainer.evaluate(dataset_fn(files, batch, is_training=False))
  assert results["examples"] == num_examples
  assert set(results) >= {"loss", "masked_lm_accuracy", "masked_lm_loss",
                          "next_sentence_accuracy", "next_sentence_loss"}
  limited = trainer.evaluate(dataset_fn(files, batch, is_training=False), num_steps=2)
  assert limited["examples"] == 2 * batch

  predictions = trainer.predict(dataset_fn(files, batch, is_training=False))
  assert predictions["mlm_logits"].shape == (num_examples, PREDICTIONS, vocab_size)
  features, _ = next(iter(dataset_fn(files, num_examples, is_training=False)(None)))
  expected = trainer.model(features, training=False)["next_sentence_logits"]
  np.testing.assert_allclose(predictions["next_sentence_logits"], expected, atol=1e-5)


# === Mixed precision ===

@pytest.mark.parametrize("dtype,kernels", [("bfloat16", "stock"), ("float16", "cpu_xla")])
def test_mixed_precision_trains_with_float32_master_weights(tmp_path, records, dtype, kernels):
  # As accelerator users run it: XLA on, dropout on, each kernel backend.
  files, vocab_size = records
  trainer = make_trainer(tmp_path, tiny_config(vocab_size, dropout=0.1),
                         engine(dtype=dtype, enable_xla=True, kernels=kernels))
  assert trainer.model.compute_dtype == dtype
  before = [v.numpy() for v in trainer.model.trainable_variables]
  logs = trainer.train(dataset_fn(files, 8), 4)
  assert np.isfinite(logs["loss"])
  assert all(v.dtype == "float32" for v in trainer.model.trainable_variables)
  changed = [not np.array_equal(b, v.numpy())
             for b, v in zip(before, trainer.model.trainable_variables)]
  assert sum(changed) > len(changed) // 2
  if dtype == "float16":
    # Dynamic loss scaling: the scale is a variable that the optimizer adjusts.
    assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    assert trainer.optimizer.dynamic_growth_steps > 0
    assert float(trainer.optimizer.scale_loss(1.0)) > 1.0
