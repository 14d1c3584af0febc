"""The training engine that pre-training and every fine-tuning script share.

`TrainerConfig` (config.py) says what training does: batch sizes, length, the loop's rhythm,
checkpoints and the optimizer (`OptimizerConfig`); `RuntimeConfig` says where and how it runs:
strategy (distribution.py), precision, XLA, kernels, seed. `create_optimizer` (optimization.py)
builds BERT's AdamW or LAMB with the warmup + linear decay schedule. `Trainer` (trainer.py)
trains, evaluates and predicts. The engine knows nothing of BERT: the pre-training task
(`official_bert.tasks.pretraining`) and the fine-tuning tasks (`official_bert.tasks`) are built
on it. A script goes from a model, a loss and datasets to results like this:

    strategy = runtime.setup()                    # a RuntimeConfig: strategy, precision, seeds
    with strategy.scope():
      model = BertClassifier(bert_config, num_classes=2)
      optimizer = config.optimizer.create(num_steps, num_warmup_steps, dtype=runtime.dtype)
    trainer = Trainer(model, loss_fn, optimizer, strategy=strategy, model_dir=output_dir,
                      config=config, runtime=runtime, metrics_fn=metrics_fn)  # a TrainerConfig
    if trainer.restore() == 0:                    # nothing to resume: start from pre-training
      restore_encoder_weights(model, init_checkpoint)
    trainer.train(train_dataset_fn, num_steps)    # resumes from model_dir's newest checkpoint
    results = trainer.evaluate(eval_dataset_fn)   # {"loss": ..., "accuracy": ..., "examples": n}
    outputs = trainer.predict(test_dataset_fn)    # {"logits": np.ndarray [examples, ...]}

with `loss_fn(outputs, labels)` -> `{"loss": ..., ...}`, `metrics_fn(outputs, labels)` ->
`{name: (total, count)}` and `dataset_fn(input_context)` -> per-replica batches of
`(features, labels)` (see `trainer` for the details). `official_bert.cli.engine_flags` turns the
shared command-line flags into a `TrainerConfig` and a `RuntimeConfig`.
"""

from official_bert.training.config import OptimizerConfig, RuntimeConfig, TrainerConfig
from official_bert.training.distribution import get_strategy, is_chief
from official_bert.training.optimization import WarmupLinearDecay, create_optimizer
from official_bert.training.trainer import NonFiniteLossError, Trainer
