"""The `Task` protocol: what a task says about itself, so that one driver runs every task.

A task owns its data, its model and its outputs: how to read its splits, turn examples into
features, build its model, its loss and training metrics, score a split and write predictions.
The driver (`official_bert.tasks.driver.run`) owns the order and the engine, the same for every
task under every strategy: validate -> train -> evaluate -> predict -> save -> export.

A new task is one module with one `Task` subclass. The smallest useful one:

>>> import tensorflow as tf
>>> from official_bert import BertClassifier, BertConfig
>>> class ConstantTask(Task):
...   name = "constant"
...
...   def build_model(self):
...     return BertClassifier(self.bert_config, num_classes=2)
...
...   def loss(self, outputs, labels):
...     return {"loss": tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
...         labels, outputs["logits"]))}
>>> config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
...                     intermediate_size=16, max_position_embeddings=16)
>>> ConstantTask(bert_config=config, vocab_file=None, max_seq_length=16).validate(Modes(eval=True))
>>> too_long = ConstantTask(bert_config=config, vocab_file=None, max_seq_length=32)
>>> too_long.validate(Modes(eval=True))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Cannot use sequence length 32 because ... up to sequence length 16 (...).
"""

import abc
import dataclasses

from absl import logging

from official_bert import tokenization
from official_bert.checkpoints import check_init_checkpoint, restore_task_weights
from official_bert.tasks import output_folder
from official_bert.tasks import runner as runner_lib


@dataclasses.dataclass(frozen=True)
class Modes:
  """What a run does: train, evaluate and/or predict (the original `--do_*` flags).

  Args:
    train: fine-tune (or pre-train), resuming from the output folder.
    eval: score the evaluation split(s) into `eval_results.txt`.
    predict: write predictions for the prediction split(s).
  """

  train: bool = False
  eval: bool = False
  predict: bool = False

  def __post_init__(self):
    if not (self.train or self.eval or self.predict):
      raise ValueError("At least one of do_train, do_eval or do_predict must be True.")

  def names(self):
    """The modes that are on, e.g. `["train", "eval"]`."""
    return [name for name in ("train", "eval", "predict") if getattr(self, name)]


class Task(abc.ABC):
  """One BERT task, as `driver.run` runs it.

  Subclasses set `name`, implement `build_model` and `loss`, and override the steps their task
  has: `validate` (read and check every split the run needs, before any training),
  `num_train_examples` and `train_input_fn` to train, `evaluate` and `predict`, and
  `model_folder_fields` for what the saved model folder records; `validate` sets `train_files`
  and `fingerprint` adds the task's own settings to what its output folder is for.
  `supported_modes` lists the modes a task has (feature extraction only predicts); `resumes`
  says whether a run continues from the newest checkpoint in `output_dir` (False for a task
  that only runs a pre-trained model, which then always starts from `init_checkpoint` and
  never reads checkpoints that happen to lie in its output folder).

  Args:
    bert_config: the encoder's `BertConfig`.
    vocab_file: the WordPiece vocabulary (copied into the saved model folder).
    do_lower_case: whether the text is lower-cased (uncased models); None for a task that reads
      no text (pre-training reads records).
    max_seq_length: tokens per example after WordPiece, special tokens included.

  Attributes:
    summary: lines describing the data read (counts, skipped rows), logged at the end.
    train_files: the training data's files (or data set names), set by `validate`; they are part
      of the run's `fingerprint`.
  """

  name = "task"
  supported_modes = ("train", "eval", "predict")
  resumes = True

  def __init__(self, *, bert_config, vocab_file, do_lower_case=True, max_seq_length=128):
    self.bert_config = bert_config
    self.vocab_file = vocab_file
    self.do_lower_case = do_lower_case
    self.max_seq_length = max_seq_length
    self.summary = []
    self.train_files = []
    self._tokenizer = None

  @property
  def tokenizer(self):
    """The `FullTokenizer` of `vocab_file`, checked to fit the model's vocabulary."""
    if self._tokenizer is None:
      self._tokenizer = tokenization.model_tokenizer(self.vocab_file, self.do_lower_case,
                                                     self.bert_config.vocab_size)
    return self._tokenizer

  # === Before any work ===

  def validate(self, modes, init_checkpoint=None):
    """Checks everything that can be checked before training; reads what the run needs.

    Subclasses call this first, then read and check their splits, so that a bad dev file or an
    unknown label stops the run before training rather than after it.

    Args:
      modes: the run's `Modes`.
      init_checkpoint: the starting checkpoint: checked to be one this package can start
        from (`checkpoints.check_init_checkpoint`), and against `do_lower_case` when it names
        the casing of a released model.
    """
    unsupported = [mode for mode in modes.names() if mode not in self.supported_modes]
    if unsupported:
      raise ValueError(f"The {self.name} task cannot {' or '.join(unsupported)}: it supports "
                       f"{', '.join(self.supported_modes)}.")
    if self.max_seq_length > self.bert_config.max_position_embeddings:
      raise ValueError(f"Cannot use sequence length {self.max_seq_length} because the BERT "
                       "model was only trained up to sequence length "
                       f"{self.bert_config.max_position_embeddings} (max_position_embeddings).")
    if init_checkpoint:
      check_init_checkpoint(init_checkpoint)
    if self.do_lower_case is not None:
      tokenization.validate_case_matches_checkpoint(self.do_lower_case, init_checkpoint)
    if self.vocab_file:
      _ = self.tokenizer  # loads and checks the vocabulary now, not after training

  def fingerprint(self):
    """What the output folder of a run of this task is for (see `tasks.output_folder`).

    Called after `validate`. Subclasses extend the parts with settings of their own that change
    the model (`model`) or how it is trained (`training`).

    Returns:
      `{"model": ..., "training": ...}` of JSON values: the model part (task kind, config,
      casing, sequence length, the saved folder's labels and settings) must match for any run
      on an existing folder; the training part (the task, its training files by content) for a
      run that trains.
    """
    return {"model": {"task": type(self).__name__, "bert_config": self.bert_config.to_dict(),
                      "do_lower_case": self.do_lower_case,
                      "max_seq_length": self.max_seq_length, **self.model_folder_fields()},
            "training": {"task": self.name,
                         "data_files": [output_folder.file_identity(path)
                                        for path in self.train_files]}}

  def needs_one_machine(self, modes):
    """Whether the run must stay on one machine: scoring and writing predictions gather every
    example's outputs in one process, which multi-worker training does not do."""
    return modes.eval or modes.predict

  # === The model ===

  @abc.abstractmethod
  def build_model(self):
    """Returns the Keras task model (built inside the strategy's scope)."""

  @abc.abstractmethod
  def loss(self, outputs, labels):
    """`loss(outputs, labels)` -> dict of float32 scalars with `loss` (see `Trainer`)."""

  # Optional: a method `metrics(outputs, labels)` -> `{name: (total, count)}`, logged during
  # training and averaged by `Runner.evaluate` (see `Trainer`).
  metrics = None

  def initialize(self, model, init_checkpoint):
    """Loads `init_checkpoint` into a model that starts a run (no checkpoint to resume): the
    encoder, and the task head where the checkpoint holds one of the model's kind and shapes
    (see `official_bert.checkpoints.restore_task_weights`).

    Returns:
      True when the head came from the checkpoint too (an original fine-tuned checkpoint).
    """
    head = restore_task_weights(model, init_checkpoint)
    logging.info("Initialised the encoder%s from %s.", " and the task head" if head else "",
                 init_checkpoint)
    return head

  def untrained(self, output_dir):
    """Called when a run that does not train finds no checkpoint to resume and no head in
    `init_checkpoint`: warns that the head is untrained (a task whose predictions would be
    meaningless raises instead)."""
    logging.warning("%s holds no fine-tuned checkpoint: the %s head is untrained.", output_dir,
                    self.name)

  # === Training ===

  def num_train_examples(self):
    """Training examples (features, for tasks that window long documents); sets the steps."""
    raise NotImplementedError(f"The {self.name} task does not train.")

  def training_steps(self, config):
    """`(num_train_steps, num_warmup_steps)` of a run: by default from the epochs, as the
    original fine-tuning scripts did (see `runner.training_steps`)."""
    return runner_lib.training_steps(self.num_train_examples(), config.train_batch_size,
                                     config.num_train_epochs, config.warmup_proportion)

  def train_input_fn(self, runner):
    """`input_fn(batch_size, input_context)` over the training data (see `runner.Runner`);
    may write the training records into `runner.config.output_dir` first."""
    raise NotImplementedError(f"The {self.name} task does not train.")

  # === After training ===

  def evaluate(self, runner):
    """Scores the evaluation split(s); returns results named as `runner.eval_results` names
    them (written to `eval_results.txt` by the driver); may write files of its own."""
    raise NotImplementedError(f"The {self.name} task does not evaluate.")

  def predict(self, runner):
    """Predicts the prediction split(s) and writes the outputs; returns the paths written."""
    raise NotImplementedError(f"The {self.name} task does not predict.")

  def model_folder_fields(self):
    """What the saved model folder records beside the weights: `labels` and `extra`."""
    return {}

  def save(self, runner):
    """Saves the model folder in `output_dir` (and the SavedModel in `export_dir`); returns
    the paths written."""
    return [runner.save(vocab_file=self.vocab_file, do_lower_case=self.do_lower_case,
                        max_seq_length=self.max_seq_length, **self.model_folder_fields())]
