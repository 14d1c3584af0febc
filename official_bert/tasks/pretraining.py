"""The pre-training task: masked LM + next-sentence prediction on `create_pretraining_data` records.

`PretrainingTask` is what `run_pretraining.py` runs through `official_bert.tasks.driver`: a
`BertPretrainer` that starts from `init_checkpoint` (an original TF1 checkpoint or a converted
folder, pre-training heads included where it has them) unless `output_dir` already holds a
checkpoint to resume, trains, evaluates into `eval_results.txt` (the original `key = value` lines)
and exports `output_dir/pretrained/`, the folder that the fine-tuning scripts take as
`--init_checkpoint`. The records come from `official_bert.pretraining` (`create_pretraining_data`
writes them, `pretraining_dataset` reads them).
"""

import os

from absl import logging
import tensorflow as tf

from official_bert.checkpoints import export_pretrained_dir
from official_bert.common import file_io
from official_bert.models.bert_pretrainer import BertPretrainer
from official_bert.models.losses import pretraining_losses, sparse_softmax_cross_entropy
from official_bert.ops.cpu_xla import label_logits
from official_bert.pretraining.dynamic_masking import DynamicMasking
from official_bert.pretraining.reader import pretraining_dataset
from official_bert.tasks import base, experiment

EXPORT_DIR = "pretrained"


def pretraining_metrics(outputs, labels, kernels="auto"):
  """The original evaluation metrics, as `(total, count)` pairs for `Trainer`.

  Masked-LM accuracy and loss are averaged over the real predictions (`masked_lm_weights`),
  next-sentence accuracy and loss over the examples. A prediction is correct when the label's
  logit is the largest (argmax, up to exact ties); that test and the cross-entropy, the same op
  as in the loss, cost little beside the training step under XLA.

  Args:
    outputs: `BertPretrainer` outputs.
    labels: dict with `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`.
    kernels: the kernels of the cross-entropy (`official_bert.ops.CHOICES`): the pre-trainer's,
      as in the loss.

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
  mlm_loss = sparse_softmax_cross_entropy(mlm_ids, mlm_logits, kernels)
  nsp_labels = tf.reshape(tf.cast(labels["next_sentence_labels"], tf.int64), [-1])
  nsp_logits = outputs["next_sentence_logits"]
  nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1), nsp_labels), tf.float32)
  nsp_loss = sparse_softmax_cross_entropy(nsp_labels, nsp_logits, kernels)
  num_predictions, num_examples = tf.reduce_sum(weights), tf.cast(tf.size(nsp_labels), tf.float32)
  return {
      "masked_lm_accuracy": (tf.reduce_sum(mlm_correct * weights), num_predictions),
      "masked_lm_loss": (tf.reduce_sum(mlm_loss * weights), num_predictions),
      "next_sentence_accuracy": (tf.reduce_sum(nsp_correct), num_examples),
      "next_sentence_loss": (tf.reduce_sum(nsp_loss), num_examples),
  }


@base.register(experiment.PretrainingConfig)
class PretrainingTask(base.Task):
  """Masked LM + next-sentence pre-training on `create_pretraining_data.py` records.

  The step count is the trainer's own (`TrainerConfig.num_train_steps` and its optimizer's
  `num_warmup_steps`, as the original's flags), not epochs; evaluation averages the original
  metrics over at most `max_eval_steps` batches of `input_file` and runs under every strategy,
  multi-worker included.

  Args:
    config: the task's settings, a `PretrainingConfig` (the records, masking, evaluation).
    bert_config: the model's `BertConfig`.

  Example:

    config = ExperimentConfig(
        task=PretrainingConfig(input_file="/tmp/tf_examples.tfrecord"),
        trainer=TrainerConfig(num_train_steps=20,
                              optimizer=OptimizerConfig(num_warmup_steps=10)),
        model=BertConfig.from_json_file("bert_config.json"), output_dir="/tmp/out")
    driver.run_experiment(config, Modes(train=True, eval=True))
  """

  name = "pre-training"
  supported_modes = ("train", "eval")

  def __init__(self, config=None, bert_config=None):
    super().__init__(config, bert_config)
    self.masking = None

  def validate(self, modes, init_checkpoint=None, **paths):
    super().validate(modes, init_checkpoint, **paths)
    files = file_io.expand_globs(self.config.input_file, what="pre-training data")
    self.summary.append(f"{len(files)} input file(s)")
    self.train_files = files if modes.train else []
    if self.config.dynamic_masking:
      if not self.config.vocab_file:
        raise ValueError("dynamic_masking needs vocab_file, for the ids of [MASK], [CLS], "
                         "[SEP].")
      self.masking = DynamicMasking.from_vocab_file(
          self.config.vocab_file, self.config.max_predictions_per_seq, self.config.masked_lm_prob,
          whole_word_mask=self.config.do_whole_word_mask)

  def needs_one_machine(self, modes):
    return False

  def build_model(self):
    return BertPretrainer(self.bert_config, kernels=self.kernels)

  def loss(self, outputs, labels):
    return pretraining_losses(outputs, labels, self.kernels)

  def metrics(self, outputs, labels):
    return pretraining_metrics(outputs, labels, self.kernels)

  def untrained(self, output_dir):
    logging.warning("%s holds no checkpoint: evaluating the initial weights.", output_dir)

  def eval_splits(self):
    return [("eval", None)]

  def evaluate_split(self, split, runner, output_dir):
    """The original's evaluation: the losses and metrics averaged over at most
    `max_eval_steps` batches, not a score of the whole split's predictions."""
    return runner.average(self.build_inputs(split, output_dir, runner.seed),
                          max_steps=self.config.max_eval_steps), []

  def build_inputs(self, split, output_dir, seed=None):
    """Batches of `input_file`'s records, for training (`"train"`) or evaluation."""
    del output_dir
    is_training, config = split == "train", self.config
    return lambda batch_size, input_context: pretraining_dataset(
        config.input_file, config.max_seq_length, config.max_predictions_per_seq, batch_size,
        is_training, input_context=input_context, dynamic_masking=self.masking, seed=seed,
        vocab_size=self.bert_config.vocab_size,
        type_vocab_size=self.bert_config.type_vocab_size)

  def save(self, model, output_dir, export_dir=None, **export_settings):
    """Exports `output_dir/pretrained/`, the folder fine-tuning takes as `--init_checkpoint`
    (export it for serving with export_saved_model.py)."""
    del export_dir, export_settings
    path = os.path.join(output_dir, EXPORT_DIR)
    export_pretrained_dir(model, self.bert_config, path, self.config.vocab_file,
                          tf1=self.config.export_tf1)
    return [path]
