"""A generated English-like corpus and sentiment task that ship with the code (no data download).

The demo and the tests need text with structure that BERT can actually learn from, and no public
corpus may be copied into the repository. The generator writes reviews of invented places:

* every document reviews one place with one opinion, and almost every sentence names the place, so
  sentence B of a true pair names the same place and carries the same sentiment as sentence A,
  while a random B usually does not: the next-sentence task is learnable;
* names, dishes and opinion words recur in fixed frames, so a masked word can be inferred from the
  rest of the document: the masked-LM task is learnable;
* most frames serve both sentiments, but each sentiment also has phrasings of its own, as real
  reviews do ("the soup tasted bland", "what a fresh pie !"): there an opinion word is seen next to
  words that only its sentiment uses, so the masked LM learns which opinion words are alike within
  a few hundred steps. Without them only the agreement across sentences tells the sentiments apart
  ("... was cold . ... was rude ."), which the demo's two-layer model had not learned after 4000
  steps: positive and negative words kept alike embeddings, and pre-training added nothing to
  fine-tuning;
* the fine-tuning task labels single review sentences positive (1) or negative (0) in the SST-2 file
  format. Its training file never uses the last two words of each opinion list; its dev file does,
  so dev accuracy shows what pre-training taught about those words from their contexts.
"""

import os
import random

import tensorflow as tf

from official_bert.common import file_io

_PLACES = ("harbor", "garden", "corner", "market", "mill", "lantern", "willow", "station",
           "orchard", "bridge", "meadow", "castle", "river", "forest", "canyon", "valley")
_KINDS = ("cafe", "bistro", "diner", "kitchen", "tavern", "bakery", "grill", "inn")
_TOWNS = ("oakton", "riverside", "millbrook", "eastfield", "hillcrest", "lakeview", "stonebridge",
          "westwood")
_DISHES = ("soup", "bread", "pasta", "fish", "salad", "pie", "stew", "coffee", "tea", "cake",
           "noodles", "curry", "pancakes", "dumplings")
_STAFF = ("waiter", "waitress", "chef", "owner", "staff", "cook", "host")
_OPINIONS = {
    1: {"food": ("delicious", "fresh", "wonderful", "tasty", "perfect", "excellent"),
        "staff": ("friendly", "kind", "helpful", "polite", "welcoming", "cheerful"),
        "room": ("cozy", "clean", "bright", "quiet", "charming", "warm"),
        "verdict": ("loved", "enjoyed", "adored", "recommend", "praise", "liked"),
        "ending": ("we will come back soon", "it was worth every penny",
                   "i can not wait to return", "it made our day", "we left very happy")},
    0: {"food": ("cold", "stale", "bland", "burnt", "awful", "salty"),
        "staff": ("rude", "slow", "careless", "grumpy", "unhelpful", "impatient"),
        "room": ("dirty", "noisy", "dark", "cramped", "smelly", "gloomy"),
        "verdict": ("hated", "disliked", "regret", "avoid", "resent", "dreaded"),
        "ending": ("we will never come back", "it was a waste of money",
                   "i want my money back", "it ruined our evening", "we left very angry")},
}
_FRAMES = (
    "the {dish} at the {name} was {food} .",
    "at the {name} our {dish} came quickly and it was {food} .",
    "the {staff} at the {name} was {staff_word} to us .",
    "the dining room of the {name} felt {room} .",
    "we {verdict} our dinner at the {name} in {town} .",
    "at the {name} i ordered the {dish} and the {dish2} , both were {food} .",
    "the {name} is on the main street of {town} and the room is {room} .",
    "after the {dish} the {staff} of the {name} brought {dish2} that was {food} .",
)
# The phrasings that only one sentiment uses (see the module docstring).
_SENTIMENT_FRAMES = {
    1: ("what a {food} {dish} !",
        "such a {staff_word} {staff} !",
        "such a {room} dining room !",
        "we {verdict} everything about the {name} !"),
    0: ("the {dish} at the {name} tasted {food} .",
        "the {staff} at the {name} seemed {staff_word} .",
        "the dining room looked {room} .",
        "we {verdict} every minute at the {name} ."),
}
_CLASSIFIER_FRAMES = (
    "the {dish} was {food}",
    "the {staff} was {staff_word}",
    "the room felt {room}",
    "we {verdict} the {name}",
    "the {dish} was {food} and the {staff} was {staff_word}",
    "{ending}",
)


def _fill(frame, rng, sentiment, name, town, held_out=0):
  words = {kind: options[:len(options) - held_out]
           for kind, options in _OPINIONS[sentiment].items()}
  dish, dish2 = rng.sample(_DISHES, 2)
  return frame.format(dish=dish, dish2=dish2, name=name, town=town, staff=rng.choice(_STAFF),
                      food=rng.choice(words["food"]), staff_word=rng.choice(words["staff"]),
                      room=rng.choice(words["room"]), verdict=rng.choice(words["verdict"]),
                      ending=rng.choice(words["ending"]))


def generate_documents(num_documents, seed=0):
  """Yields documents, each a list of sentences reviewing one place with one sentiment.

  Args:
    num_documents: how many documents to generate.
    seed: random seed; the same seed gives the same corpus.
  """
  rng = random.Random(seed)
  for _ in range(num_documents):
    sentiment = rng.randrange(2)
    name = f"{rng.choice(_PLACES)} {rng.choice(_KINDS)}"
    town = rng.choice(_TOWNS)
    frames = _FRAMES + _SENTIMENT_FRAMES[sentiment]
    frames = rng.sample(frames, rng.randint(4, len(frames)))
    sentences = [_fill(frame, rng, sentiment, name, town) for frame in frames]
    sentences.append(f"{_fill('{ending}', rng, sentiment, name, town)} .")
    yield sentences


def write_pretraining_corpus(path, num_documents=2000, seed=0):
  """Writes the corpus in the pre-training input format: a sentence a line, blank line between docs.

  Args:
    path: output text file.
    num_documents: number of reviews.
    seed: random seed.

  Returns:
    The number of sentences written.

  Example:

  >>> import tempfile, os
  >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
  >>> write_pretraining_corpus(path, num_documents=3) > 12
  True
  """
  documents = list(generate_documents(num_documents, seed))
  file_io.write_text(path, "\n\n".join("\n".join(doc) for doc in documents) + "\n")
  return sum(len(doc) for doc in documents)


def write_sentiment_task(data_dir, num_train=2000, num_dev=400, seed=1):
  """Writes `train.tsv` and `dev.tsv` in the GLUE SST-2 format (`sentence<TAB>label`, a header).

  Args:
    data_dir: output folder (created if missing).
    num_train: training sentences.
    num_dev: evaluation sentences (from a different random stream than training).
    seed: random seed.

  Returns:
    A dict from file name to the fraction of positive labels in it.
  """
  tf.io.gfile.makedirs(data_dir)
  balance = {}
  for file_name, count, stream, held_out in (("train.tsv", num_train, 0, 2),
                                             ("dev.tsv", num_dev, 1, 0)):
    rng = random.Random(seed * 1000 + stream)
    rows, positives = ["sentence\tlabel"], 0
    for _ in range(count):
      sentiment = rng.randrange(2)
      positives += sentiment
      name = f"{rng.choice(_PLACES)} {rng.choice(_KINDS)}"
      sentence = _fill(rng.choice(_CLASSIFIER_FRAMES), rng, sentiment, name, rng.choice(_TOWNS),
                       held_out)
      rows.append(f"{sentence}\t{sentiment}")
    file_io.write_text(os.path.join(data_dir, file_name), "\n".join(rows) + "\n")
    balance[file_name] = positives / max(count, 1)
  return balance
