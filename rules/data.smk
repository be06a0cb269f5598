# Stage data (kdflow.core.data): each task's raw GLUE or Sara files, or the hub's copy, become its prepared
# splits.


rule prepare_task:
    """Ingest one task (local GLUE TSV layout, Sara's thesis layout, or the hub) into the common schema."""
    input:
        raw=lambda w: raw_task_files(config, w.task),
    output:
        directory(paths.DATA),
    log:
        "logs/prepare_task/{task}.log",
    benchmark:
        paths.benchmark("prepare_task/{task}")
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        source_dir=lambda w: task_source_dir(config, w.task),
        code=code_of("prepare_task.py"),
    script:
        "../scripts/prepare_task.py"
