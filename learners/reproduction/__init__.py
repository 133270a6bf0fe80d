"""Reproducing a paper's table in one command (`python -m learners.reproduce`).

The plans (stages a paper ran, as data), the stage runner (resumable stage folders), the
published numbers typed from the papers, and the report that sets them beside ours.

Every stage drives a command of this toolkit as a child process (`python -m learners.train`,
`learners.evaluate`, `learners.report`, `splits ...`), never the learners' own modules."""

__all__ = [
    "best_checkpoint",
    "data_folder",
    "plan_atg",
    "plan_dhillon",
    "plan_meta_dataset",
    "plan_parts",
    "plans",
    "published_numbers",
    "report_stage",
    "report_table",
    "split_files",
    "stage_records",
    "stage_runner",
    "stages",
    "train_and_valid_split",
]
