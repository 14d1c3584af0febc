"""`python shuffle_records.py`: TFRecords into new files in random order (`bert-shuffle-records`).

Its flags and documentation are in `official_bert/cli/shuffle_records.py`.
"""

from official_bert.cli import shuffle_records

if __name__ == "__main__":
  shuffle_records.run()
