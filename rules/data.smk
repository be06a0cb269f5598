# Stage data (kdflow.core.data): each task's raw GLUE or Sara files, or the hub's copy, become its prepared
# splits.


use rule kdflow_job as prepare_task with:
    """Ingest one task (local GLUE TSV layout, Sara's thesis layout, or the hub) into the common schema."""
    input:
        raw=lambda w: raw_task_files(config, w.task),
    output:
        directory(paths.DATA),
    log:
        "logs/prepare_task/{task}.log",
    benchmark:
        paths.benchmark("prepare_task/{task}")
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        **runs("prepare_task.py"),
        source_dir=lambda w: task_source_dir(config, w.task),
