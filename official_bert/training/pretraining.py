"""The pre-training task: masked LM + next-sentence prediction on `create_pretraining_data` records.

`run_pretraining` is what `run_pretraining.py` calls: it builds a `BertPretrainer` from a
`bert_config.json`, starts from `init_checkpoint` (an original TF1 checkpoint or a converted
folder) unless `output_dir` already holds a checkpoint to resume, trains, evaluates into
`eval_results.txt` (the original `key = value` lines) and exports `output_dir/pretrained/`, the
folder that the fine-tuning scripts take as `--init_checkpoint`.
"""

import os

from absl import logging
import tensorflow as tf

from official_bert.checkpoints import export_pretrained_dir, restore_pretrainer_weights
from official_bert.configs import BertConfig
from official_bert.data.pretraining_reader import pretraining_dataset
from official_bert.models.bert_pretrainer import BertPretrainer
from official_bert.models.cross_entropy import label_logits, sparse_softmax_cross_entropy
from official_bert.models.losses import pretraining_losses
from official_bert.preprocessing.masking import DynamicMasking
from official_bert.training import distribution, progress
from official_bert.training.config import EngineConfig
from official_bert.training.optimization import create_optimizer
from official_bert.training.trainer import Trainer

EXPORT_DIR = "pretrained"
EVAL_RESULTS = "eval_results.txt"


def pretraining_metrics(outputs, labels):
  """The original evaluation metrics, as `(total, count)` pairs for `Trainer`.

  Masked-LM accuracy and loss are averaged over the real predictions (`masked_lm_weights`),
  next-sentence accuracy and loss over the examples. A prediction is correct when the label's
  logit is the largest (argmax, up to exact ties); that test and the cross-entropy, the same op
  as in the loss, cost little beside the training step under XLA.

  Args:
    outputs: `BertPretrainer` outputs.
    labels: dict with `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`.

  Returns:
    Dict of `(total, count)` for `masked_lm_accuracy`, `masked_lm_loss`,
    `next_sentence_accuracy` and `next_sentence_loss`.
  """
  weights = tf.cast(labels["masked_lm_weights"], tf.float32)
  mlm_ids, mlm_logits = labels["masked_lm_ids"], outputs["mlm_logits"]
  # The maximum, the label's logit and the cross-entropy are those of the loss; XLA computes them
  # once for both.
  mlm_correct = tf.cast(label_logits(mlm_ids, mlm_logits) >= tf.reduce_max(mlm_logits, -1),
                        tf.float32)
  mlm_loss = sparse_softmax_cross_entropy(mlm_ids, mlm_logits)
  nsp_labels = tf.reshape(tf.cast(labels["next_sentence_labels"], tf.int64), [-1])
  nsp_logits = outputs["next_sentence_logits"]
  nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1), nsp_labels), tf.float32)
  nsp_loss = sparse_softmax_cross_entropy(nsp_labels, nsp_logits)
  num_predictions, num_examples = tf.reduce_sum(weights), tf.cast(tf.size(nsp_labels), tf.float32)
  return {
      "masked_lm_accuracy": (tf.reduce_sum(mlm_correct * weights), num_predictions),
      "masked_lm_loss": (tf.reduce_sum(mlm_loss * weights), num_predictions),
      "next_sentence_accuracy": (tf.reduce_sum(nsp_correct), num_examples),
      "next_sentence_loss": (tf.reduce_sum(nsp_loss), num_examples),
  }


def run_pretraining(*, bert_config_file, input_file, output_dir, do_train=False, do_eval=False,
                    init_checkpoint=None, max_seq_length=128, max_predictions_per_seq=20,
                    train_batch_size=32, eval_batch_size=8, learning_rate=5e-5,
                    num_train_steps=100000, num_warmup_steps=10000, max_eval_steps=100,
                    dynamic_masking=False, vocab_file=None, masked_lm_prob=0.15,
                    do_whole_word_mask=False, export_tf1=False, engine=EngineConfig()):
  """Pre-trains (and/or evaluates) BERT, resuming from `output_dir` when it holds a checkpoint.

  Args:
    bert_config_file: the model's `bert_config.json`.
    input_file: comma-separated TFRecord files or globs from `create_pretraining_data.py`.
    output_dir: checkpoints, TensorBoard summaries, `eval_results.txt` and the export.
    do_train: train to `num_train_steps`.
    do_eval: evaluate on `input_file` afterwards.
    init_checkpoint: optional starting weights: an original TF1 checkpoint prefix (encoder and
      MLM/NSP heads, as in the original) or a converted or Hugging Face folder (the heads too where
      it has them); ignored when resuming.
    max_seq_length: sequence length of the records.
    max_predictions_per_seq: masked positions per record.
    train_batch_size: global training batch (all replicas, all micro-batches).
    eval_batch_size: global evaluation batch.
    learning_rate: peak learning rate.
    num_train_steps: training steps; the learning rate reaches zero there.
    num_warmup_steps: steps of linear warmup.
    max_eval_steps: evaluation batches at most.
    dynamic_masking: draw new masks for every batch instead of the stored ones.
    vocab_file: the vocabulary; needed for `dynamic_masking` and copied into the export.
    masked_lm_prob: fraction of tokens masked by dynamic masking.
    do_whole_word_mask: dynamic masking masks whole words.
    export_tf1: also export the original TF1 checkpoint format.
    engine: the `EngineConfig`.

  Returns:
    The evaluation results (dict), or an empty dict without `do_eval`.

  Example, a short run over the files `create_pretraining_data` wrote:

      run_pretraining(bert_config_file="bert_config.json",
                      input_file="/tmp/tf_examples.tfrecord", output_dir="/tmp/out",
                      do_train=True, num_train_steps=20, num_warmup_steps=10)
  """
  if not do_train and not do_eval:
    raise ValueError("At least one of do_train or do_eval must be True.")
  config = BertConfig.from_json_file(bert_config_file)
  if max_seq_length > config.max_position_embeddings:
    raise ValueError(f"max_seq_length={max_seq_length} is longer than the "
                     f"max_position_embeddings={config.max_position_embeddings} of "
                     f"{bert_config_file}.")
  masking = None
  if dynamic_masking:
    if not vocab_file:
      raise ValueError("dynamic_masking needs vocab_file, for the ids of [MASK], [CLS], [SEP].")
    masking = DynamicMasking.from_vocab_file(vocab_file, max_predictions_per_seq, masked_lm_prob,
                                             whole_word_mask=do_whole_word_mask)
  tf.io.gfile.makedirs(output_dir)
  strategy = engine.setup()
  with strategy.scope():
    model = BertPretrainer(config)
    optimizer = create_optimizer(engine.optimizer_type, learning_rate, num_train_steps,
                                 num_warmup_steps, engine.weight_decay,
                                 dtype=engine.dtype) if do_train else None
  trainer = Trainer(model, pretraining_losses, optimizer, strategy=strategy,
                    model_dir=output_dir, config=engine, metrics_fn=pretraining_metrics)
  if trainer.restore() == 0 and init_checkpoint:
    heads = restore_pretrainer_weights(model, init_checkpoint)
    logging.info("Initialised the encoder%s from %s.",
                 " and the pre-training heads" if heads else "",
                 init_checkpoint)

  def dataset_fn(batch_size, is_training):
    return lambda input_context: pretraining_dataset(
        input_file, max_seq_length, max_predictions_per_seq, batch_size, is_training,
        input_context=input_context, dynamic_masking=masking, seed=engine.seed)

  chief = distribution.is_chief(strategy)
  if do_train:
    logging.info("***** Running training *****  batch size %d, %d steps", train_batch_size,
                 num_train_steps)
    trainer.train(dataset_fn(train_batch_size, is_training=True), num_train_steps)
    if chief:
      export_pretrained_dir(model, config, os.path.join(output_dir, EXPORT_DIR), vocab_file,
                            tf1=export_tf1)
  if not do_eval:
    return {}
  logging.info("***** Running evaluation *****  batch size %d, at most %d steps",
               eval_batch_size, max_eval_steps)
  results = trainer.evaluate(dataset_fn(eval_batch_size, is_training=False), max_eval_steps)
  results["global_step"] = int(trainer.global_step.numpy())
  if chief:
    _write_eval_results(os.path.join(output_dir, EVAL_RESULTS), results)
    progress.write_scalars(os.path.join(output_dir, "eval"), results["global_step"], results)
  return results


def _write_eval_results(path, results):
  """Writes `key = value` lines, sorted, as the original did; atomically."""
  logging.info("***** Eval results *****")
  lines = []
  for key in sorted(results):
    logging.info("  %s = %s", key, results[key])
    lines.append(f"{key} = {results[key]}\n")
  temporary = f"{path}.tmp-{os.getpid()}"
  with tf.io.gfile.GFile(temporary, "w") as f:
    f.write("".join(lines))
  tf.io.gfile.rename(temporary, path, overwrite=True)
