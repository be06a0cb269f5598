# The cost plan before the run (kdflow.workflow.plan): `snakemake --cores 1 results/plan.csv` (or `make plan`) reads
# the config and the throughput tables, runs no model and needs no GPU.


rule plan:
    """The cost plan: per experiment (or stage) and rule, the jobs, the examples x epochs and the estimated hours
    on the config's `plan.gpu` for the jobs that ask for a GPU (CPU-hours for the others), with where every
    throughput comes from (measured on a CPU, or scaled)."""
    input:
        sizes="reference/task_sizes.csv",
        throughput="reference/throughput.csv",
        startup="reference/startup.csv",
        counted=plan_counted_files(),
    output:
        csv="results/plan.csv",
        markdown="results/plan.md",
        html=report(
            "results/report/plan.html",
            caption="../report/plan.rst",
            category="Cost plan",
            labels={"table": "jobs and estimated hours before the run"},
        ),
    log:
        "logs/plan.log",
    benchmark:
        "results/benchmarks/plan.tsv"
    localrule: True
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        config=config_digest(config),
        gpu=config.get("plan", {}).get("gpu", "H100"),
        probing_files={
            task: probing_file(task) for task in PROBING_CONFIG.get("tasks", [])
        },
        code=code_of("plan.py"),
    script:
        "../scripts/plan.py"
