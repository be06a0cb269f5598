# Stage export (kdflow.export): a selected student as a folder that transformers loads without kdflow, with
# its tokenizer and model card (docs/export.md). Asked for by path, never in the default target:
# results/export/{experiment}/{task}/{student}/{method}.


rule export_student:
    """The student an experiment selected for a task, student and method (the selected grid point's best-dev
    seed, as glue_submission takes it) as a save_pretrained folder with its tokenizer, a model card and
    kdflow.json, checked on every dev example against kdflow's own predictions before it is written.
    """
    input:
        unpack(
            lambda w: export_inputs(config, w.experiment, w.task, w.student, w.method)
        ),
    output:
        directory("results/export/{experiment}/{task}/{student}/{method}"),
    log:
        "logs/export_student/{experiment}/{task}/{student}/{method}.log",
    benchmark:
        "results/benchmarks/export_student/{experiment}/{task}/{student}/{method}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        export=lambda w: export_params(
            config, w.experiment, w.task, w.student, w.method
        ),
        config_files=[
            os.path.relpath(path) for path in workflow.config_settings.configfiles
        ],
        replace_config=workflow.config_settings.replace_workflow_config,
        config_overrides=dict(workflow.config_settings.config),
        code=code_of("export_student.py"),
    script:
        "../scripts/export_student.py"
