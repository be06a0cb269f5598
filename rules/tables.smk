rule teacher_table:
    """Teachers and their per-layer pseudo-heads, per task, as CSV and Markdown."""
    input:
        teachers=expand(
            "results/teachers/{pair[0]}/{pair[1]}/metrics.json",
            pair=teacher_jobs(config),
        ),
        heads=expand(
            "results/pseudo_heads/{pair[0]}/{pair[1]}/metrics.json",
            pair=teacher_jobs(config),
        ),
    output:
        csv="results/tables/teachers.csv",
        markdown="results/tables/teachers.md",
        html=report(
            "results/report/teachers.html",
            caption="../report/teachers.rst",
            category="Teachers",
            labels={"table": "teachers and their per-layer pseudo-heads"},
        ),
    log:
        "logs/teacher_table.log",
    benchmark:
        "results/benchmarks/teacher_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        jobs=teacher_jobs(config),
        code=code_of("teacher_table.py"),
    script:
        "../scripts/teacher_table.py"


rule claims_table:
    """The papers' central claims on real data, a verdict per link, from the committed record of
    benchmarks/quality_claims.py (config `evidence`; kdflow.reporting.claims)."""
    input:
        runs=config.get("evidence", {}).get("runs", []),
        dev_labels=config.get("evidence", {}).get("dev_labels", []),
        config=config.get("evidence", {}).get("config", []),
    output:
        markdown="results/tables/claims.md",
        html=report(
            "results/report/claims.html",
            caption="../report/claims.rst",
            category="Evidence on real data",
            labels={"table": "the papers' claims, tested"},
        ),
    log:
        "logs/claims_table.log",
    benchmark:
        "results/benchmarks/claims_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_of("claims_table.py"),
    script:
        "../scripts/claims_table.py"


rule ledger_table:
    """The deviation ledger as a page of its own: every difference from the papers' protocols and every setting
    they leave silent, with the paper's value, kdflow's, why and the effect (kdflow.reporting.ledger).
    """
    input:
        ledger=PAPER_TABLES.get("deviations", []),
    output:
        table="results/tables/ledger.csv",
        markdown="results/tables/ledger.md",
        html=report(
            "results/report/ledger.html",
            caption="../report/ledger.rst",
            category="Deviation ledger",
            labels={"table": "kdflow against the papers' protocols"},
        ),
    log:
        "logs/ledger_table.log",
    benchmark:
        "results/benchmarks/ledger_table.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        code=code_of("ledger_table.py"),
    script:
        "../scripts/ledger_table.py"
