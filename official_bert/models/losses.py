"""The pre-training losses of the original BERT: weighted masked-LM and next-sentence."""

from keras import ops

from official_bert import ops as kernel_ops

# Keeps the masked-LM average finite for a batch whose weights are all zero, as the original did.
_WEIGHT_EPSILON = 1e-5


def sparse_softmax_cross_entropy(labels, logits, kernels="auto"):
  """Per-row `-log softmax(logits)[label]` in float32, by `kernels`' form.

  Args:
    labels: int `[...]`, each in `[0, classes)`.
    logits: float `[..., classes]`.
    kernels: the kernels (`official_bert.ops.CHOICES`, or a backend's module); those of the
      model whose logits these are.

  Returns:
    float32 `[...]`.
  """
  return kernel_ops.kernels(kernels).sparse_softmax_cross_entropy(labels, logits)


def masked_lm_loss(labels, logits, weights, kernels="auto"):
  """Cross-entropy over the masked positions, averaged with their weights.

  Args:
    labels: int `[batch, predictions]`, the original token ids (`masked_lm_ids`).
    logits: `[batch, predictions, vocab]`.
    weights: `[batch, predictions]`, 1.0 for a real prediction and 0.0 for padding
      (`masked_lm_weights`).
    kernels: the kernels of the cross-entropy (see `sparse_softmax_cross_entropy`).

  Returns:
    A float32 scalar: `sum(weights * xent) / (sum(weights) + 1e-5)`.
  """
  weights = ops.cast(weights, "float32")
  per_position = sparse_softmax_cross_entropy(labels, logits, kernels)
  return ops.sum(per_position * weights) / (ops.sum(weights) + _WEIGHT_EPSILON)


def next_sentence_loss(labels, logits, kernels="auto"):
  """Mean cross-entropy of the 2-way next-sentence prediction (label 1 = random next).

  Args:
    labels: int `[batch]` or `[batch, 1]` (`next_sentence_labels`).
    logits: `[batch, 2]`.
    kernels: the kernels of the cross-entropy (see `sparse_softmax_cross_entropy`).
  """
  labels = ops.reshape(ops.cast(labels, "int32"), (-1,))
  return ops.mean(sparse_softmax_cross_entropy(labels, logits, kernels))


def pretraining_losses(outputs, labels, kernels="auto"):
  """The original pre-training objective and its two parts.

  Args:
    outputs: `BertPretrainer` outputs (`mlm_logits`, `next_sentence_logits`).
    labels: dict with `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`.
    kernels: the kernels of the cross-entropies (`official_bert.ops.CHOICES`): the
      pre-trainer's, `model.kernels`.

  Returns:
    A dict of float32 scalars: `loss` (the sum), `masked_lm_loss`, `next_sentence_loss`.

  Example:

  >>> import numpy as np
  >>> losses = pretraining_losses(
  ...     {"mlm_logits": np.zeros((1, 2, 4), "float32"),
  ...      "next_sentence_logits": np.zeros((1, 2), "float32")},
  ...     {"masked_lm_ids": np.array([[1, 0]]), "masked_lm_weights": np.array([[1.0, 0.0]]),
  ...      "next_sentence_labels": np.array([0])})
  >>> round(float(losses["loss"]), 4)  # log(4) + log(2)
  2.0794
  """
  kernels = kernel_ops.kernels(kernels)  # chosen once for both
  mlm = masked_lm_loss(labels["masked_lm_ids"], outputs["mlm_logits"],
                       labels["masked_lm_weights"], kernels)
  nsp = next_sentence_loss(labels["next_sentence_labels"], outputs["next_sentence_logits"],
                           kernels)
  return {"loss": mlm + nsp, "masked_lm_loss": mlm, "next_sentence_loss": nsp}
