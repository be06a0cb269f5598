# Stage reporting (kdflow.reporting), the cost plan before the run (kdflow.workflow.cost_plan): `snakemake --cores 1
# results/plan.csv` (`make plan`) asks Snakemake for this workflow's DAG under the same config, prices each job from
# the throughput tables, runs no model and needs no GPU; the plan against the run, and calibrated on it.


use rule kdflow_job as plan with:
    """The cost plan: per experiment (or stage) and rule, the jobs, the examples x epochs and the estimated hours
    on the config's `plan.gpu` for the jobs that ask for a GPU (CPU-hours for the others), with where every
    throughput comes from (measured on a CPU, or scaled); and the pilot, the fewest jobs that calibrate it
    (results/pilot.csv, kdflow.reporting.pilot: `make pilot` runs them)."""
    input:
        sizes="reference/task_sizes.csv",
        throughput="reference/throughput.csv",
        startup="reference/startup.csv",
        sharing="reference/gpu_sharing.csv",
        counted=counted_files(
            config,
            [probing_file(task) for task in PROBING_CONFIG.get("tasks", [])],
        ),
    output:
        csv=paths.PLAN_CSV,
        jobs=paths.PLAN_JOBS_CSV,
        pilot=paths.PILOT_CSV,
        markdown=paths.PLAN_MD,
        html=report(
            paths.PLAN_PAGE,
            caption="../report/plan.rst",
            category=category("Cost plan"),
            labels={"table": "jobs and estimated hours before the run"},
        ),
    log:
        "logs/plan.log",
    benchmark:
        paths.benchmark("plan")
    localrule: True
    params:
        **runs("plan.py"),
        config=config_digest(config),
        rules=workflow_fingerprint(workflow.basedir),
        snakemake_config={
            "configfiles": [str(path) for path in workflow.config_settings.configfiles],
            "config": dict(workflow.config_settings.config),
            "replace_workflow_config": workflow.config_settings.replace_workflow_config,
        },
        gpu=config.get("plan", {}).get("gpu", "H100"),
        probing_files={task: probing_file(task) for task in PROBING_CONFIG.get("tasks", [])},


use rule kdflow_job as plan_measured with:
    """The cost plan against the run: per section and rule, the planned hours beside the hours Snakemake's
    benchmark files measured for the jobs that ran, built last from the config's default targets
    (kdflow.reporting.plan_pages).
    """
    input:
        jobs=paths.PLAN_JOBS_CSV,
        made=DEFAULT_TARGETS,
    output:
        **page_and_csv(
            caption="../report/plan_measured.rst",
            category=category("Cost plan"),
            labels={"table": "planned against measured hours"},
            table=paths.PLAN_MEASURED_CSV,
            markdown=paths.PLAN_MEASURED_MD,
            html=paths.PLAN_MEASURED_PAGE,
        ),
    log:
        "logs/plan_measured.log",
    benchmark:
        paths.benchmark("plan_measured")
    localrule: True
    params:
        **runs("plan_measured.py"),


use rule kdflow_job as plan_calibrated with:
    """The cost plan calibrated on the jobs that ran (kdflow.reporting.calibration): the plan's figures refit per
    group of jobs from the benchmark files that exist, the remaining jobs priced with them, per paper table the
    jobs done, the hours spent and left, with an interval. Not a default target: `make plan` builds it, during a
    run or after the pilot."""
    input:
        jobs=paths.PLAN_JOBS_CSV,
    output:
        progress=paths.PLAN_CALIBRATED_CSV,
        figures=paths.PLAN_FIGURES_CSV,
        jobs=paths.PLAN_CALIBRATED_JOBS_CSV,
        markdown=paths.PLAN_CALIBRATED_MD,
        html=paths.PLAN_CALIBRATED_PAGE,
    log:
        "logs/plan_calibrated.log",
    benchmark:
        paths.benchmark("plan_calibrated")
    localrule: True
    params:
        **runs("plan_calibrated.py"),
        sections=paper_table_experiments(config),
        measured=lambda wildcards: benchmarks_state(),
