"""Rule export_student: an experiment's selected student as a folder that transformers loads without kdflow."""

import logging
import shutil
from pathlib import Path

from kdflow.core import run_files
from kdflow.core.job_setup import rule_job
from kdflow.export.onnx_export import onnx_available
from kdflow.export.student_export import applicable_deviations, export_student, rebuild_command

with rule_job(snakemake):
    export = snakemake.params.export
    request = export["request"]
    deviations = applicable_deviations(snakemake.input.get("deviations"), export["paper_tables"],
                                       **request, teacher=export["teacher"]["name"])
    context = {"teacher": export["teacher"], "paper": export["paper"], "scale_note": export["scale_note"],
               "license": export.get("license"),
               "deviations": deviations,
               "config_files": snakemake.params.config_files, "config_overrides": snakemake.params.config_overrides,
               "rebuild": rebuild_command(snakemake.output.folder, snakemake.params.config_files,
                                          snakemake.params.replace_config, snakemake.params.config_overrides)}
    record = export_student(request, snakemake.input.selection, export["runs_dir"], snakemake.input.data,
                            snakemake.input.teacher, snakemake.output.folder, context, onnx=onnx_available())
    # the card, in the report
    shutil.copyfile(Path(snakemake.output.folder) / run_files.MODEL_CARD, snakemake.output.card)
    logging.getLogger("kdflow").info("exported %s (point %s, seed %s) to %s", record["model_class"],
                                     record["run"]["point"], record["run"]["seed"], snakemake.output.folder)
