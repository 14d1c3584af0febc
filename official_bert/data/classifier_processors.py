"""The processors of sentence(-pair) classification data, and the one place that picks one.

Three kinds read a data source into `classifier_data.InputExample`s:

* `glue.GlueProcessor`: the GLUE tasks, from the files of `download_glue_data.py` / the GLUE site;
* `custom_data.CustomProcessor`: the user's own CSV, TSV or JSON-lines files;
* `tfds_data.TfdsProcessor`: the `glue/*` datasets of TensorFlow Datasets.

`get_processor` picks one from the names the `run_classifier.py` flags carry.
"""

from official_bert.data import custom_data, glue, tfds_data


def get_processor(task_name, data_dir=None, *, tfds_name=None, **custom_options):
  """Returns the processor for a GLUE task, the user's own files, or a TFDS dataset.

  Args:
    task_name: a GLUE task (`cola`, `sst-2`, `mrpc`, `sts-b`, `qqp`, `mnli`, `qnli`, `rte`, `wnli`,
      `ax`; case and `-` do not matter) or `custom`. Ignored when `tfds_name` is given.
    data_dir: the folder of the task's files; with `tfds_name`, the TFDS data folder (optional).
    tfds_name: a TFDS dataset such as `glue/sst2`, read instead of files.
    **custom_options: keyword arguments of `CustomProcessor` (`text_a_column`, `label_column`,
      `text_b_column`, `is_regression`, `has_header`, ...) for `task_name="custom"`;
      `skip_malformed_rows` for a GLUE task or a TFDS dataset.

  Returns:
    A `DataProcessor`.

  Example:

  >>> processor = get_processor("MRPC", "glue_data/MRPC")
  >>> processor.get_labels()
  ['0', '1']
  """
  if tfds_name:
    return tfds_data.TfdsProcessor(tfds_name, data_dir=data_dir, **custom_options)
  if data_dir is None:
    raise ValueError(f"task {task_name!r} reads files: give their folder as data_dir")
  if task_name.lower() == "custom":
    return custom_data.CustomProcessor(data_dir, **custom_options)
  return glue.GlueProcessor(task_name, data_dir, **custom_options)

