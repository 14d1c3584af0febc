"""The PyTorch side of `pretraining_throughput.py`: Hugging Face `BertForPreTraining` steps.

Run by `pretraining_throughput.py` (through `hf_bridge.TorchProcess`) with the Python of an
environment that has `torch` and `transformers`; it imports neither TensorFlow nor this package.
It talks JSON, one object a line:

1. in: `{"config": {...}}` (a `BertConfig` as a dict); out: the parameter names and shapes of the
   `BertForPreTraining` it built, so that the caller can map its weights onto them;
2. in: `{"weights": "<file.npz>", "dtype": ..., "compile": ..., "batch": ..., "seq": ...,
   "predictions": ..., "steps": ...}`; loads the weights (every parameter must be in the file) and
   runs two windows of steps (the compilation under `torch.compile`); out: the versions;
3. in: `{"time": true}`, as often as asked; runs one window of `steps` steps, out: its
   sequences per second.

A step is what `run_pretraining.py` does: the encoder, the masked-LM head on the gathered masked
positions only (as the original and this package do; `BertForPreTraining.forward` would project
every position onto the vocabulary), the next-sentence head, the two cross-entropies, backward,
global-norm clipping at 1.0 and AdamW (decoupled weight decay 0.01 except on biases and layer
norms, epsilon 1e-6, PyTorch's fused CPU kernel), with dropout 0.1. `bfloat16` runs the forward
pass and the losses under `torch.autocast("cpu", dtype=torch.bfloat16)` with float32 master
weights, as PyTorch recommends; `compile` wraps the forward pass and the losses in
`torch.compile` (the backward pass is then compiled too).
"""

import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch_serving import hf_bert_config
import transformers


def pretraining_model(config):
  return transformers.BertForPreTraining(hf_bert_config(config))


def load_weights(model, path):
  with np.load(path) as weights:
    loaded = {name: torch.from_numpy(weights[name].copy()) for name in weights.files}
  missing = [name for name, _ in model.named_parameters() if name not in loaded]
  if missing:
    raise ValueError(f"No weights for {', '.join(missing)}.")
  with torch.no_grad():
    for name, parameter in model.named_parameters():
      parameter.copy_(loaded[name])


def random_batch(vocab_size, batch, seq, predictions):
  generator = torch.Generator().manual_seed(0)
  ids = torch.randint(5, vocab_size, (batch, seq), generator=generator)
  positions = torch.stack([torch.randperm(seq - 1, generator=generator)[:predictions].sort()[0] + 1
                           for _ in range(batch)])
  return {"ids": ids, "mask": torch.ones_like(ids), "types": (torch.arange(seq) >= seq // 2)
          .long().expand(batch, seq), "positions": positions,
          "masked_ids": torch.randint(5, vocab_size, (batch, predictions), generator=generator),
          "masked_weights": torch.ones(batch, predictions),
          "next_sentence": torch.randint(0, 2, (batch,), generator=generator)}


def pretraining_loss(model, ids, mask, types, positions, masked_ids, masked_weights,
                     next_sentence):
  encoded = model.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)
  sequence = encoded.last_hidden_state
  gathered = torch.gather(sequence, 1, positions[..., None].expand(-1, -1, sequence.shape[-1]))
  mlm_logits = model.cls.predictions(gathered).float()
  per_position = F.cross_entropy(mlm_logits.flatten(0, 1), masked_ids.flatten(), reduction="none")
  weights = masked_weights.flatten()
  mlm = (per_position * weights).sum() / (weights.sum() + 1e-5)
  nsp = F.cross_entropy(model.cls.seq_relationship(encoded.pooler_output).float(), next_sentence)
  return mlm + nsp


class Stepper:
  """One job's model, optimizer and batch on `device` (`cpu` or `cuda`, where the model is);
  `window()` runs `steps` training steps and returns their sequences per second."""

  def __init__(self, model, job, device="cpu"):
    self.model = model.train()
    decayed = [p for n, p in model.named_parameters() if not n.endswith("bias")
               and "LayerNorm" not in n]
    exempt = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    self.optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": 0.01}, {"params": exempt, "weight_decay": 0.0}],
        lr=1e-4, eps=1e-6, fused=True)  # PyTorch's fused kernel, on CPUs and on GPUs
    self.loss = (torch.compile(pretraining_loss) if job["compile"] else pretraining_loss)
    self.autocast = torch.autocast(device, dtype=torch.bfloat16,
                                   enabled=job["dtype"] == "bfloat16")
    self.batch = {name: value.to(device) for name, value in random_batch(
        model.config.vocab_size, job["batch"], job["seq"], job["predictions"]).items()}
    self.steps, self.size = job["steps"], job["batch"]
    # A GPU runs the steps asynchronously: a window ends when they have run.
    self.synchronize = torch.cuda.synchronize if device == "cuda" else lambda: None

  def window(self):
    self.synchronize()
    start = time.perf_counter()
    for _ in range(self.steps):
      self.optimizer.zero_grad(set_to_none=True)
      with self.autocast:
        loss = self.loss(self.model, **self.batch)
      loss.backward()
      torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
      self.optimizer.step()
    self.synchronize()
    seconds = time.perf_counter() - start
    if not torch.isfinite(loss):
      raise FloatingPointError(f"The loss is {loss.item()}.")
    return self.steps * self.size / seconds


def answer(value):
  print(json.dumps(value), flush=True)


def main():
  torch.manual_seed(0)
  model = pretraining_model(json.loads(sys.stdin.readline())["config"])
  answer({name: list(p.shape) for name, p in model.named_parameters()})
  job = json.loads(sys.stdin.readline())
  load_weights(model, job["weights"])
  stepper = Stepper(model, job)
  for _ in range(2):  # compiles, and lets the fused optimizer allocate its state
    stepper.window()
  answer({"torch": torch.__version__, "transformers": transformers.__version__,
          "threads": torch.get_num_threads()})
  for line in sys.stdin:
    if json.loads(line).get("time"):
      answer({"rate": stepper.window()})


if __name__ == "__main__":
  main()
