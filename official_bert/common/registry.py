"""The kinds of model a model folder can hold, each declared once, by its model class.

A model class declares its kind with `@register("classifier")`, which sets its `kind` attribute;
a model folder's manifest names the kind, and `model_class(kind)` finds the class that rebuilds it.
The registry sits beside `configs.py` rather than in `models/` because the encoder (in `networks/`)
is a kind too, and `models/` builds on `networks/`.

Example:

>>> from official_bert import BertClassifier
>>> BertClassifier.kind, model_class("classifier") is BertClassifier
('classifier', True)
"""

_CLASSES = {}


def register(kind):
  """A class decorator: `cls.kind = kind`, and `model_class(kind)` returns `cls`.

  Args:
    kind: the name a model folder's manifest gives the class's models, e.g. `"span_labeler"`.
  """
  def decorate(cls):
    if _CLASSES.get(kind, cls) is not cls:
      raise ValueError(f"Model kind {kind!r} is already taken by {_CLASSES[kind].__name__}.")
    cls.kind = kind
    _CLASSES[kind] = cls
    return cls
  return decorate


def kinds():
  """The registered kinds, sorted."""
  return tuple(sorted(_CLASSES))


def model_class(kind):
  """Returns the model class registered under `kind`; a `ValueError` names the known kinds."""
  if kind not in _CLASSES:
    raise ValueError(f"Unknown model kind {kind!r}; the known kinds are {', '.join(kinds())}.")
  return _CLASSES[kind]


def kind_of(model):
  """Returns the kind of `model`, whose class (not a subclass of it) must be registered."""
  kind = getattr(type(model), "kind", None)
  if kind is None or _CLASSES.get(kind) is not type(model):
    raise TypeError(f"{type(model).__name__} is no registered model class; decorate it with "
                    "official_bert.common.registry.register(kind) to save it in a model folder.")
  return kind
