"""`FunctionalModel`: the base of the package's models, a Keras functional model on any backend."""

import keras


class FunctionalModel(keras.Model):
  """A `keras.Model` built by calling `super().__init__(inputs=..., outputs=...)` after its
  layers were made attributes, as KerasHub's backbones are.

  On PyTorch a Keras layer is a `torch.nn.Module`, which refuses to become an attribute before
  the model's `__init__` has run; the functional graph tracks every layer and weight, so there
  the attributes are set plainly.
  """

  def __setattr__(self, name, value):
    if keras.backend.backend() == "torch":
      object.__setattr__(self, name, value)
      return
    super().__setattr__(name, value)
