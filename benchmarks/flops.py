"""FLOP counts of BERT's steps, for the throughput benchmarks' model FLOP/s and MFU.

Training FLOPs per step (forward + backward = 3 x forward, a matmul of m x k by k x n = 2mkn):

    6 * 12 * L * H^2 * B * S        transformer matmuls: 12 H^2 weights per layer, B * S tokens
  + 12 * L * B * S^2 * H            attention scores and their weighted sum (2 * 2 S^2 H forward)
  + 6 * (H * V + H^2) * B * P       MLM transform and vocabulary projection, masked positions only

(embedding lookups, the pooler, layer norms, softmax and the optimizer are left out). Standard
library only: the scripts that run without TensorFlow import it too.

>>> round(training_flops(12, 768, 1, 128, 20) / 1e9, 1)  # BERT-Base, one sequence of 128
69.9
"""

VOCAB = 30522


def encoder_flops(layers, hidden, tokens, seq):
  """Forward FLOPs of the encoder's matrix products over `tokens` tokens in sequences of `seq`."""
  return 2 * 12 * layers * hidden**2 * tokens + 4 * layers * tokens * seq * hidden


def training_flops(layers, hidden, batch, seq, predictions):
  """Training FLOPs of one pre-training step (see the module docstring)."""
  masked_lm = 2 * (hidden * VOCAB + hidden**2) * batch * predictions
  return 3 * (encoder_flops(layers, hidden, batch * seq, seq) + masked_lm)
