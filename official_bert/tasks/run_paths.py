"""The driver's check of a run's folders, before any work.

The scripts check every path flag against every other (`official_bert.common.paths`, through
`official_bert.cli.launch`); a run started from Python gets the same check here for the folders
of its `ExperimentConfig`: `output_dir` and `export_dir` apart from `init_checkpoint` and from
each other, both writable, and `export_dir` free for an export (absent, empty, or an earlier
export of ours: `official_bert.export.archive`; for `export_format=litert|onnx`, a file that is
absent or an earlier export of ours; for any format but `saved_model`, with the format's packages
installed and the calibration file there), so that a taken export stops the run before training,
not after it.

Example:

>>> from official_bert.tasks.experiment import ExperimentConfig
>>> check_run_folders(ExperimentConfig(output_dir="ram://run_paths_example/out",
...                                    export_dir="ram://run_paths_example/out/export"),
...                   resumes=True)
>>> check_run_folders(ExperimentConfig(output_dir="ram://run_paths_example/model",
...                                    init_checkpoint="ram://run_paths_example/model"),
...                   resumes=True)
Traceback (most recent call last):
...
official_bert.common.paths.PathConflictError: --output_dir=ram://run_paths_example/model is \
--init_checkpoint=ram://run_paths_example/model: the run would overwrite or delete what it reads. \
Choose another --output_dir.
"""

from official_bert.common import paths
from official_bert.export import archive, formats


def check_run_folders(config, *, resumes):
  """Refuses a run whose output folders would destroy its input or cannot take its outputs.

  Args:
    config: the `experiment.ExperimentConfig`.
    resumes: the task keeps its checkpoints in `output_dir` (`Task.resumes`); a task that does
      not (feature extraction) writes nothing of its own there, and its folder is not checked.

  Raises:
    UserError: one line naming the folder and what is wrong.
  """
  outputs = {"output_dir": config.output_dir if resumes else None,
             "export_dir": config.export_dir}
  one_file = config.export_format not in formats.FOLDER_FORMATS
  paths.check_run_paths({"init_checkpoint": config.init_checkpoint}, outputs,
                        files=["export_dir"] if one_file else [])
  if config.export_dir and config.export_format != "saved_model":
    formats.check_export_target(config.export_dir, config.export_format,
                                config.export_precision, config.calibration_file)
  elif config.export_dir:
    archive.check_export_dir(config.export_dir, overwrite=True)
