"""The engine's configs: the trainer's step counts, the checks of each setting, the optimizer
they build, and the fingerprint names on the fields."""

import dataclasses

import keras
import pytest

from official_bert.common.errors import UserError
from official_bert.training import config as config_lib
from official_bert.training.config import OptimizerConfig, RuntimeConfig, TrainerConfig
from official_bert.training.optimization import WarmupLinearDecay


def test_training_steps_follow_the_original_rounding():
  assert TrainerConfig(train_batch_size=32, num_train_epochs=3.0).steps(3668) == (343, 34)
  half = OptimizerConfig(warmup_proportion=0.5)
  assert TrainerConfig(train_batch_size=32, num_train_epochs=1.0, optimizer=half).steps(100) \
      == (3, 1)
  ten = OptimizerConfig(num_warmup_steps=10)
  assert TrainerConfig(num_train_steps=20, optimizer=ten).steps() == (20, 10)
  with pytest.raises(ValueError, match="no training step"):
    TrainerConfig(train_batch_size=32, num_train_epochs=1.0).steps(10)


@pytest.mark.parametrize("config_class, field, value, message", [
    (TrainerConfig, "train_batch_size", 0, "train_batch_size must be at least 1"),
    (TrainerConfig, "num_train_epochs", 0.0, "num_train_epochs must be positive"),
    (TrainerConfig, "num_train_steps", 0, "num_train_steps must be at least 1"),
    (TrainerConfig, "steps_per_loop", 0, "steps_per_loop must be at least 1"),
    (TrainerConfig, "keep_checkpoint_max", 0, "keep_checkpoint_max must be at least 1"),
    (OptimizerConfig, "warmup_proportion", 1.5, "warmup_proportion must be in"),
    (OptimizerConfig, "learning_rate", 0.0, "learning_rate must be positive"),
    (OptimizerConfig, "type", "sgd", "optimizer type must be one of adamw"),
    (RuntimeConfig, "dtype", "int8", "dtype must be one of float32"),
    (RuntimeConfig, "distribution_strategy", "many", "distribution_strategy must be one of"),
])
def test_each_config_refuses_bad_values(config_class, field, value, message):
  with pytest.raises(ValueError, match=message):
    config_class(**{field: value})


def test_a_batch_that_accumulation_cannot_split_is_refused():
  with pytest.raises(UserError, match="train_batch_size 30 does not split into "
                     "gradient_accumulation_steps=4"):
    TrainerConfig(train_batch_size=30, gradient_accumulation_steps=4)
  assert TrainerConfig(train_batch_size=32, gradient_accumulation_steps=4)


def test_the_optimizer_config_builds_its_optimizer_with_every_setting():
  config = OptimizerConfig(type="adamw_bias_corrected", learning_rate=1e-3, weight_decay=0.05,
                           beta_1=0.8, beta_2=0.95, epsilon=1e-8)
  optimizer = config.create(num_train_steps=100, num_warmup_steps=10)
  assert isinstance(optimizer, keras.optimizers.AdamW)
  assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.8, 0.95, 1e-8)
  assert optimizer.weight_decay == 0.05
  schedule = optimizer._learning_rate  # pylint: disable=protected-access
  assert isinstance(schedule, WarmupLinearDecay)
  assert (schedule.learning_rate, schedule.num_train_steps, schedule.num_warmup_steps) == (
      1e-3, 100, 10)
  assert isinstance(OptimizerConfig().create(10, 1, dtype="float16"),
                    keras.optimizers.LossScaleOptimizer)
  assert OptimizerConfig(warmup_proportion=0.25).warmup_steps(10) == 2
  assert OptimizerConfig(num_warmup_steps=3).warmup_steps(10) == 3


@dataclasses.dataclass(frozen=True)
class _Node:
  plain: int = 1
  renamed: str = config_lib.setting(config_lib.TRAINING, "a", key="old_name")
  switch: bool = config_lib.setting(config_lib.TRAINING, False)
  gated: float = config_lib.setting(config_lib.TRAINING, 0.5, only_with="switch")
  later: float = config_lib.setting(config_lib.TRAINING, 0.9, unless_default=True)
  shape: int = config_lib.setting(config_lib.MODEL, 4)


@dataclasses.dataclass(frozen=True)
class _Tree:
  node: _Node = _Node()
  trainer: TrainerConfig = TrainerConfig()


def test_the_fingerprint_reads_the_metadata_on_the_fields_of_the_whole_tree():
  parts = {config_lib.MODEL: {}, config_lib.TRAINING: {}}
  config_lib.fingerprint_parts(_Tree(), parts)
  # Named as earlier versions recorded them; a gated setting is None while its switch is off;
  # a setting that earlier versions did not record is left out at its default.
  assert parts == {
      "model": {"shape": 4},
      "training": {"old_name": "a", "switch": False, "gated": None, "train_batch_size": 32,
                   "num_train_epochs": 3.0, "optimizer_type": "adamw", "learning_rate": 5e-5,
                   "warmup_proportion": 0.1, "weight_decay": 0.01}}
  parts = {config_lib.MODEL: {}, config_lib.TRAINING: {}}
  config_lib.fingerprint_parts(_Tree(node=_Node(switch=True, later=0.8)), parts)
  assert parts["training"]["gated"] == 0.5 and parts["training"]["later"] == 0.8
