"""Entity-level precision, recall and F1 for IOB-tagged sequences, as defined for CoNLL NER.

An entity (chunk) is a maximal run of tokens that share one type; it counts as correct only when a
predicted entity has the same type and the same first and last token as a gold entity. The chunk
rules are those of the CoNLL `conlleval` script, which read IOB1 and IOB2 alike:

* `B-X` always starts a new entity of type X;
* `I-X` continues the entity before it when that one has type X, and otherwise starts a new one
  (so IOB1's `I-X` after `O`, and IOB2 data with a stray `I-X`, both open an entity);
* `O` closes any open entity. Sentence boundaries close entities too.

Token accuracy (the share of tokens whose predicted tag equals the gold tag) is reported beside the
entity scores, as conlleval does.
"""

import collections
import dataclasses

OUTSIDE = "O"


@dataclasses.dataclass(frozen=True)
class EntityScores:
  """Counts and scores for one entity type, or for all of them.

  Attributes:
    num_gold: entities in the gold tags.
    num_predicted: entities in the predicted tags.
    num_correct: predicted entities whose type and both boundaries match a gold entity.
  """
  num_gold: int
  num_predicted: int
  num_correct: int

  @property
  def precision(self):
    return self.num_correct / self.num_predicted if self.num_predicted else 0.0

  @property
  def recall(self):
    return self.num_correct / self.num_gold if self.num_gold else 0.0

  @property
  def f1(self):
    total = self.precision + self.recall
    return 2 * self.precision * self.recall / total if total else 0.0


@dataclasses.dataclass(frozen=True)
class NerReport:
  """The result of `evaluate`: overall and per-type entity scores plus token accuracy.

  Attributes:
    overall: scores over all entity types together (micro average).
    per_type: entity type -> scores, for every type seen in the gold or the predicted tags.
    num_tokens: tokens compared.
    token_accuracy: share of tokens whose predicted tag equals the gold tag.
  """
  overall: EntityScores
  per_type: dict
  num_tokens: int
  token_accuracy: float

  def to_dict(self):
    """Returns the scores as a flat dict of fractions in [0, 1], per type under `<type>/...`."""
    result = {"precision": self.overall.precision, "recall": self.overall.recall,
              "f1": self.overall.f1, "token_accuracy": self.token_accuracy}
    for entity_type, scores in sorted(self.per_type.items()):
      result[f"{entity_type}/precision"] = scores.precision
      result[f"{entity_type}/recall"] = scores.recall
      result[f"{entity_type}/f1"] = scores.f1
    return result

  def format(self):
    """Returns a conlleval-like text table (scores in percent)."""
    lines = [
        f"processed {self.num_tokens} tokens with {self.overall.num_gold} phrases; found: "
        f"{self.overall.num_predicted} phrases; correct: {self.overall.num_correct}.",
        _format_row("accuracy: %6.2f%%; " % (100 * self.token_accuracy), self.overall),
    ]
    for entity_type, scores in sorted(self.per_type.items()):
      lines.append(_format_row(f"{entity_type:>17}: ", scores)
                   + f"  {scores.num_predicted}")
    return "\n".join(lines)


def _format_row(prefix, scores):
  return (f"{prefix}precision: {100 * scores.precision:6.2f}%; "
          f"recall: {100 * scores.recall:6.2f}%; FB1: {100 * scores.f1:6.2f}")


def _split_tag(tag, position):
  """Returns (prefix, type) of one tag; `position` names it in the error message."""
  if tag == OUTSIDE:
    return OUTSIDE, ""
  prefix, sep, entity_type = tag.partition("-")
  if prefix not in ("B", "I") or not sep or not entity_type:
    raise ValueError(f"{position}: tag {tag!r} is not 'O', 'B-<type>' or 'I-<type>' "
                     "(only the IOB1 and IOB2 schemes are supported)")
  return prefix, entity_type


def extract_entities(tags, sentence_name="tags"):
  """Returns the entities of one tagged sentence.

  Args:
    tags: sequence of tag strings (`O`, `B-<type>`, `I-<type>`), IOB1 or IOB2.
    sentence_name: how error messages name this sequence.

  Returns:
    A list of `(type, start, end)` tuples, `end` exclusive, in order of `start`.

  Raises:
    ValueError: a tag is neither `O` nor `B-`/`I-` followed by a type.

  Example:
    >>> extract_entities(["B-PER", "I-PER", "O", "I-LOC", "B-LOC"])
    [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5)]
  """
  entities = []
  open_type, open_start = None, 0
  for position, tag in enumerate(tags):
    prefix, entity_type = _split_tag(tag, f"{sentence_name}, token {position}")
    continues = prefix == "I" and entity_type == open_type
    if open_type is not None and not continues:
      entities.append((open_type, open_start, position))
      open_type = None
    if prefix != OUTSIDE and not continues:
      open_type, open_start = entity_type, position
  if open_type is not None:
    entities.append((open_type, open_start, len(tags)))
  return entities


def evaluate(gold_sentences, predicted_sentences):
  """Scores predicted tags against gold tags at the entity level (the CoNLL definition).

  Args:
    gold_sentences: a sequence of sentences, each a sequence of gold tag strings.
    predicted_sentences: the predicted tags, with the same number of sentences and of tags in each.

  Returns:
    A `NerReport` with overall (micro-averaged) and per-type scores and the token accuracy.

  Raises:
    ValueError: the two do not line up, or a tag is malformed.

  Example:
    >>> report = evaluate([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
    >>> report.overall.num_correct, report.overall.precision
    (0, 0.0)
  """
  gold_sentences, predicted_sentences = list(gold_sentences), list(predicted_sentences)
  if len(gold_sentences) != len(predicted_sentences):
    raise ValueError(f"{len(gold_sentences)} gold sentences but {len(predicted_sentences)} "
                     "predicted ones")
  gold_counts, predicted_counts, correct_counts = (
      collections.Counter(), collections.Counter(), collections.Counter())
  num_tokens = num_equal = 0
  for index, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
    if len(gold) != len(predicted):
      raise ValueError(f"sentence {index}: {len(gold)} gold tags but {len(predicted)} predicted")
    gold_entities = extract_entities(gold, f"gold sentence {index}")
    predicted_entities = extract_entities(predicted, f"predicted sentence {index}")
    gold_counts.update(entity[0] for entity in gold_entities)
    predicted_counts.update(entity[0] for entity in predicted_entities)
    correct_counts.update(entity[0] for entity in set(gold_entities) & set(predicted_entities))
    num_tokens += len(gold)
    num_equal += sum(g == p for g, p in zip(gold, predicted))
  per_type = {
      entity_type: EntityScores(gold_counts[entity_type], predicted_counts[entity_type],
                                correct_counts[entity_type])
      for entity_type in set(gold_counts) | set(predicted_counts)
  }
  overall = EntityScores(sum(gold_counts.values()), sum(predicted_counts.values()),
                         sum(correct_counts.values()))
  accuracy = num_equal / num_tokens if num_tokens else 0.0
  return NerReport(overall=overall, per_type=per_type, num_tokens=num_tokens,
                   token_accuracy=accuracy)
