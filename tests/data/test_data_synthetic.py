"""The generated demo corpus and sentiment task: format, determinism, and the structure to learn."""

import csv

from official_bert.data import synthetic


def _sentiments_of(text):
  found = set()
  for label, words in synthetic._OPINIONS.items():
    for kind, options in words.items():
      if kind != "ending" and any(f" {word} " in f" {text} " for word in options):
        found.add(label)
  return found


def test_corpus_format_and_determinism(tmp_path):
  first, second = tmp_path / "a.txt", tmp_path / "b.txt"
  sentences = synthetic.write_pretraining_corpus(first, num_documents=50, seed=3)
  synthetic.write_pretraining_corpus(second, num_documents=50, seed=3)
  assert first.read_bytes() == second.read_bytes()
  documents = first.read_text().strip().split("\n\n")
  assert len(documents) == 50
  assert sum(len(doc.split("\n")) for doc in documents) == sentences
  synthetic.write_pretraining_corpus(second, num_documents=50, seed=4)
  assert first.read_bytes() != second.read_bytes()


def test_each_document_keeps_one_place_and_one_sentiment():
  for document in synthetic.generate_documents(200, seed=0):
    text = " ".join(document)
    assert len(_sentiments_of(text)) == 1, text
    places = {f"{p} {k}" for p in synthetic._PLACES for k in synthetic._KINDS
              if f"{p} {k}" in text}
    assert len(places) == 1, text


def test_sentiment_task_labels_and_held_out_words(tmp_path):
  balance = synthetic.write_sentiment_task(tmp_path, num_train=300, num_dev=300)
  assert all(0.35 < fraction < 0.65 for fraction in balance.values())
  held_out = {word for words in synthetic._OPINIONS.values() for kind, options in words.items()
              if kind != "ending" for word in options[-2:]}
  for name, expect_held_out in (("train.tsv", False), ("dev.tsv", True)):
    with open(tmp_path / name, newline="") as f:
      rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["sentence", "label"]
    for sentence, label in rows[1:]:
      assert _sentiments_of(sentence) <= {int(label)}, sentence
    words = {word for sentence, _ in rows[1:] for word in sentence.split()}
    assert bool(words & held_out) == expect_held_out
