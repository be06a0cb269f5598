# The papers' figures: Universal-KD Fig. 3 (pseudo-head distance to the gold label per teacher layer; a student
# layer's attention over the teacher's layers), thesis Figs. 6.1-6.2 (probing per layer), 6.5 and C.2.


rule figure_pseudo_heads:
    """Universal-KD Fig. 3 (left), per teacher and task."""
    input:
        "results/tables/teachers.csv",
    output:
        report(
            "results/figures/pseudo_heads.png",
            caption="../report/figure_pseudo_heads.rst",
            category="Universal-KD (Wu et al. 2021)",
            subcategory="Figure 3",
            labels={"figure": "pseudo-heads' distance to the gold label (left)"},
        ),
    log:
        "logs/figure_pseudo_heads.log",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_of("figure_pseudo_heads.py"),
    script:
        "../scripts/figure_pseudo_heads.py"


rule figure_probing:
    """Thesis Figs. 6.1-6.2: probing accuracy per layer, by layer index and by relative depth."""
    input:
        "results/tables/probing.csv",
    output:
        layers=report(
            "results/figures/probing.png",
            caption="../report/figure_probing.rst",
            category="Sučík (2020)",
            subcategory="Probing (§6.1)",
            labels={"result": "accuracy per layer (Figs. 6.1-6.2)"},
        ),
        depth=report(
            "results/figures/probing_relative_depth.png",
            caption="../report/figure_probing.rst",
            category="Sučík (2020)",
            subcategory="Probing (§6.1)",
            labels={"result": "accuracy per relative depth (Figs. 6.1-6.2)"},
        ),
    log:
        "logs/figure_probing.log",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_of("figure_probing.py"),
    script:
        "../scripts/figure_probing.py"


rule figure_analysis:
    """Thesis Fig. 6.5 (confidence correlations) and Fig. C.2 (mistake overlap) of one task."""
    input:
        "results/analysis/{task}.json",
    output:
        confidence=report(
            "results/figures/confidence_correlation_{task}.png",
            caption="../report/figure_confidence.rst",
            category="Sučík (2020)",
            subcategory="Prediction analysis (§6.2)",
            labels={"task": "{task}", "result": "confidence correlation (Fig. 6.5)"},
        ),
        mistakes=report(
            "results/figures/mistake_overlap_{task}.png",
            caption="../report/figure_mistakes.rst",
            category="Sučík (2020)",
            subcategory="Prediction analysis (§6.2)",
            labels={"task": "{task}", "result": "mistake overlap (Fig. C.2)"},
        ),
    log:
        "logs/figure_analysis/{task}.log",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        code=code_of("figure_analysis.py"),
    script:
        "../scripts/figure_analysis.py"


rule attention_maps:
    """Universal-KD Fig. 3 (middle, right): a student layer's attention over the teacher's layers for 10 dev
    examples, for each configured student (e.g. Universal-KD(IL) and ALP), beside the pseudo-heads' distance
    to the gold label on the same examples (left)."""
    input:
        unpack(attention_inputs),
    output:
        json="results/figures/attention_{task}.json",
        figure=report(
            "results/figures/attention_{task}.png",
            caption="../report/figure_attention.rst",
            category="Universal-KD (Wu et al. 2021)",
            subcategory="Figure 3",
            labels={
                "figure": "attention over teacher layers (middle, right)",
                "task": "{task}",
            },
        ),
    log:
        "logs/attention_maps/{task}.log",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        models=lambda w: {
            name: model_params(name) for name in config["attention_maps"][w.task]
        },
        examples=10,
        seed=0,
        device=config["device"],
        precision=config["precision"],
        code=code_of("attention_maps.py"),
    script:
        "../scripts/attention_maps.py"
