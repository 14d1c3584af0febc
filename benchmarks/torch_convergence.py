"""The PyTorch side of `pretraining_convergence.py`: Hugging Face `BertForPreTraining` trained
from the same weights, on the same batches, with the same recipe as this package's rows.

Run by `pretraining_convergence.py` (through `hf_bridge.TorchProcess`) with the Python of an
environment that has `torch` and `transformers`; it imports neither TensorFlow nor this package.
It talks JSON, one object a line:

1. in: `{"config": {...}}` (a `BertConfig` as a dict); out: the parameter names and shapes of the
   `BertForPreTraining` it built, so that the caller can map its initial weights onto them;
2. in: `{"weights": "<file.npz>", "train": "<batches.npz>", "eval": "<batches.npz>", "dtype":
   ..., "learning_rate": ..., "num_train_steps": ..., "num_warmup_steps": ..., "weight_decay":
   ..., "clip_norm": ..., "seed": ...}`; loads the weights (every parameter must be in the file)
   and the batches (arrays `[batches, batch, ...]`, named as the package's reader names its
   features and labels); out: the versions;
3. in: `{"train": n}`: the next `n` training steps; out: their seconds and mean loss;
4. in: `{"evaluate": true}`: out: the held-out metrics, computed as the package's
   `pretraining_metrics` computes them (see `evaluate`).

The step is the package's recipe: the encoder, the masked-LM head on the gathered masked positions
only, the next-sentence head, the weighted masked-LM cross-entropy plus the next-sentence one,
backward, global-norm clipping, then `torch.optim.AdamW` (bias-corrected, as Keras' AdamW that
the package's `adamw_bias_corrected` is; decoupled weight decay except on biases and layer norms;
beta 0.9 / 0.999, epsilon 1e-6; PyTorch's fused CPU kernel) on the package's schedule
(`WarmupLinearDecay`: linear warmup from 0, then linear decay to 0 measured from step 0, the rate
of step `s` applied by the `s`-th update counting from 0). Dropout is the config's. `bfloat16`
runs the forward pass and the losses under `torch.autocast("cpu", dtype=torch.bfloat16)` with
float32 master weights.
"""

import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch_pretraining import load_weights, pretraining_model
import transformers

# Keeps the masked-LM average finite for a batch without predictions, as the package's loss does.
WEIGHT_EPSILON = 1e-5


def load_batches(path):
  """The batches of an .npz file: `{name: tensor [batches, batch, ...]}`; ids as int64, which
  `torch.gather` needs."""
  with np.load(path) as arrays:
    return {name: torch.from_numpy(arrays[name].astype(
        np.float32 if arrays[name].dtype.kind == "f" else np.int64)) for name in arrays.files}


def logits(model, batch):
  """`(masked-LM logits [batch, predictions, vocab], next-sentence logits [batch, 2])`."""
  encoded = model.bert(input_ids=batch["input_word_ids"], attention_mask=batch["input_mask"],
                       token_type_ids=batch["input_type_ids"])
  sequence = encoded.last_hidden_state
  positions = batch["masked_lm_positions"]
  gathered = torch.gather(sequence, 1, positions[..., None].expand(-1, -1, sequence.shape[-1]))
  return (model.cls.predictions(gathered).float(),
          model.cls.seq_relationship(encoded.pooler_output).float())


def per_example(mlm_logits, nsp_logits, batch):
  """The per-position masked-LM and per-example next-sentence cross-entropies."""
  mlm = F.cross_entropy(mlm_logits.flatten(0, 1), batch["masked_lm_ids"].flatten(),
                        reduction="none").view(batch["masked_lm_ids"].shape)
  nsp = F.cross_entropy(nsp_logits, batch["next_sentence_labels"], reduction="none")
  return mlm, nsp


def learning_rate_factor(num_train_steps, num_warmup_steps):
  """The package's `WarmupLinearDecay` as a `LambdaLR` factor of the update's 0-based step."""
  def factor(step):
    if step < num_warmup_steps:
      return step / num_warmup_steps
    return 1.0 - min(step, num_train_steps) / num_train_steps
  return factor


class Run:
  """One training run: model, optimizer, schedule and the batches, consumed in order."""

  def __init__(self, model, job):
    torch.manual_seed(job["seed"])  # dropout
    load_weights(model, job["weights"])
    self.model = model.train()
    decayed = [p for n, p in model.named_parameters() if not n.endswith("bias")
               and "LayerNorm" not in n]
    exempt = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    self.optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": job["weight_decay"]},
         {"params": exempt, "weight_decay": 0.0}],
        lr=job["learning_rate"], betas=(0.9, 0.999), eps=1e-6, fused=True)
    self.schedule = torch.optim.lr_scheduler.LambdaLR(
        self.optimizer, learning_rate_factor(job["num_train_steps"], job["num_warmup_steps"]))
    self.clip_norm = job["clip_norm"]
    self.autocast = torch.autocast("cpu", dtype=torch.bfloat16,
                                   enabled=job["dtype"] == "bfloat16")
    self.train_batches = load_batches(job["train"])
    self.eval_batches = load_batches(job["eval"])
    self.step = 0

  @staticmethod
  def _batch(batches, index):
    return {name: values[index] for name, values in batches.items()}

  def train(self, steps):
    """Runs the next `steps` steps; returns their seconds and mean loss."""
    total, start = 0.0, time.perf_counter()
    for _ in range(steps):
      batch = self._batch(self.train_batches, self.step)
      self.optimizer.zero_grad(set_to_none=True)
      with self.autocast:
        mlm, nsp = per_example(*logits(self.model, batch), batch)
        weights = batch["masked_lm_weights"]
        loss = (mlm * weights).sum() / (weights.sum() + WEIGHT_EPSILON) + nsp.mean()
      loss.backward()
      if self.clip_norm:
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
      self.optimizer.step()
      self.schedule.step()
      self.step += 1
      total += loss.item()
      if not np.isfinite(total):
        raise FloatingPointError(f"The loss at step {self.step} is {loss.item()}.")
    return {"seconds": time.perf_counter() - start, "loss": total / max(steps, 1),
            "step": self.step}

  def evaluate(self):
    """The metrics over all held-out batches, as the package's `pretraining_metrics` and
    `Trainer.evaluate` compute them: a masked prediction is right when the label's logit is the
    largest, weighted by `masked_lm_weights`; masked-LM figures are sums over the weighted
    predictions of all batches divided by their weight, next-sentence ones means over the
    examples."""
    self.model.eval()
    sums = dict.fromkeys(("mlm_correct", "mlm_loss", "weight", "nsp_correct", "nsp_loss",
                          "examples"), 0.0)
    with torch.no_grad(), self.autocast:
      for index in range(len(self.eval_batches["input_word_ids"])):
        batch = self._batch(self.eval_batches, index)
        mlm_logits, nsp_logits = logits(self.model, batch)
        mlm, nsp = per_example(mlm_logits, nsp_logits, batch)
        weights = batch["masked_lm_weights"]
        label = torch.gather(mlm_logits, -1, batch["masked_lm_ids"][..., None])[..., 0]
        correct = (label >= mlm_logits.max(-1).values).float()
        sums["mlm_correct"] += float((correct * weights).sum())
        sums["mlm_loss"] += float((mlm * weights).sum())
        sums["weight"] += float(weights.sum())
        sums["nsp_correct"] += float((nsp_logits.argmax(-1) == batch["next_sentence_labels"])
                                     .float().sum())
        sums["nsp_loss"] += float(nsp.sum())
        sums["examples"] += len(nsp)
    self.model.train()
    return {"masked_lm_accuracy": sums["mlm_correct"] / sums["weight"],
            "masked_lm_loss": sums["mlm_loss"] / sums["weight"],
            "next_sentence_accuracy": sums["nsp_correct"] / sums["examples"],
            "next_sentence_loss": sums["nsp_loss"] / sums["examples"]}


def answer(value):
  print(json.dumps(value), flush=True)


def main():
  model = pretraining_model(json.loads(sys.stdin.readline())["config"])
  answer({name: list(p.shape) for name, p in model.named_parameters()})
  run = Run(model, json.loads(sys.stdin.readline()))
  answer({"torch": torch.__version__, "transformers": transformers.__version__,
          "threads": torch.get_num_threads()})
  for line in sys.stdin:
    request = json.loads(line)
    answer(run.evaluate() if request.get("evaluate") else run.train(request["train"]))


if __name__ == "__main__":
  main()
