# The papers' tables with kdflow's numbers beside them (reference/paper_results.csv; kdflow.reporting.paper_tables),
# the model sizes and CPU speeds thesis Table 5.2 reports, and the runtimes of thesis Table 4.5.


rule measure_inference:
    """Non-embedding parameters and CPU milliseconds per example of a named model on its task's dev split, in
    batches of 256 (thesis Table 5.2)."""
    input:
        unpack(lambda w: model_files(w.model)),
    output:
        "results/inference/{model}.json",
    log:
        "logs/measure_inference/{model}.log",
    benchmark:
        "results/benchmarks/measure_inference/{model}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 4
    resources:
        mem_mb=16000,
        runtime=60,
    params:
        model=lambda w: model_params(w.model),
        batch_size=256,
        code=code_of("measure_inference.py"),
    script:
        "../scripts/measure_inference.py"


rule paper_table:
    """One paper table: every number the paper reports, kdflow's value and, for scores, the difference; or
    the paper's selected hyperparameters beside kdflow's (CSV, Markdown, LaTeX)."""
    input:
        unpack(paper_table_inputs),
        deviations=PAPER_TABLES.get("deviations", []),
    output:
        csv="results/tables/papers/{paper_table}.csv",
        markdown="results/tables/papers/{paper_table}.md",
        latex="results/tables/papers/{paper_table}.tex",
        html=report(
            "results/report/paper_{paper_table}.html",
            caption="../report/paper_table.rst",
            category="Paper tables",
            labels={"table": "{paper_table}"},
        ),
    log:
        "logs/paper_table/{paper_table}.log",
    benchmark:
        "results/benchmarks/paper_table/{paper_table}.tsv"
    wildcard_constraints:
        paper_table="|".join(PAPER_TABLES.get("tables", {})) or "no-tables",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        spec=lambda w: canonical(PAPER_TABLES["tables"][w.paper_table]),
        title=lambda w: title_of(PAPER_TABLES["tables"][w.paper_table]),
        values=paper_table_values,
        code=code_of("paper_table.py"),
    script:
        "../scripts/paper_table.py"


rule runtime_table:
    """Thesis Table 4.5: the wall-clock hours of every step of the pipeline up to the thesis's students, from the
    benchmark files of their jobs, beside the thesis's (CSV, Markdown, LaTeX)."""
    input:
        reference=RUNTIME_TABLE.get("reference", []),
        benchmarks=[job["benchmark"] for job in RUNTIME_JOBS],
    output:
        csv="results/tables/runtimes.csv",
        markdown="results/tables/runtimes.md",
        latex="results/tables/runtimes.tex",
        html=report(
            "results/report/runtimes.html",
            caption="../report/runtime_table.rst",
            category="Paper tables",
            labels={"table": "thesis_table45 (runtimes)"},
        ),
    log:
        "logs/runtime_table.log",
    benchmark:
        "results/benchmarks/runtime_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        jobs=RUNTIME_JOBS,
        code=code_of("runtime_table.py"),
    script:
        "../scripts/runtime_table.py"
