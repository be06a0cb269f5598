rule finetune_generator:
    """Fine-tune the generator (a causal LM, GPT-2 medium in the thesis) on a task's training sentences and
    record its held-out (dev) perplexity."""
    input:
        data="results/data/{task}",
    output:
        model=directory("results/generators/{task}/model"),
        metrics="results/generators/{task}/metrics.json",
        curves="results/generators/{task}/curves.parquet",
    log:
        "logs/finetune_generator/{task}.log",
    conda:
        "../envs/kdflow.yaml"
    threads: generation_resource("threads")
    resources:
        gpu=generation_resource("gpu"),
        mem_mb=generation_resource("mem_mb"),
        runtime=generation_resource("runtime"),
    params:
        settings=lambda w: generator_settings(config),
        device=config["device"],
        precision=config["precision"],
        code=code_of("finetune_generator.py"),
    script:
        "../scripts/finetune_generator.py"


rule sample_transfer_shard:
    """One shard of the generated sentences, sampled with its own seed (a rerun reproduces it)."""
    input:
        data="results/data/{task}",
        generator="results/generators/{task}/model",
    output:
        "results/transfer/{task}/shards/{shard}.parquet",
    log:
        "logs/sample_transfer_shard/{task}/{shard}.log",
    conda:
        "../envs/kdflow.yaml"
    threads: generation_resource("threads")
    resources:
        gpu=generation_resource("gpu"),
        mem_mb=generation_resource("mem_mb"),
        runtime=generation_resource("runtime"),
    params:
        sampling=lambda w: sampling_settings(config),
        device=config["device"],
        precision=config["precision"],
        code=code_of("sample_transfer_shard.py"),
    script:
        "../scripts/sample_transfer_shard.py"


rule build_augmented_transfer_set:
    """Train plus the generated shards after hygiene: no malformed or empty sequences and, as
    `generation.hygiene` says, no unfinished, copied or repeated ones; counts."""
    input:
        data="results/data/{task}",
        shards=lambda w: expand(
            "results/transfer/{task}/shards/{shard}.parquet",
            task=w.task,
            shard=range(config["generation"]["sampling"]["shards"]),
        ),
    output:
        transfer="results/transfer/{task}/augmented.parquet",
        hygiene="results/transfer/{task}/hygiene.json",
    log:
        "logs/build_augmented_transfer_set/{task}.log",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        hygiene=lambda w: hygiene_settings(config),
        code=code_of("build_augmented_transfer_set.py"),
    script:
        "../scripts/build_augmented_transfer_set.py"


rule transfer_statistics:
    """Generated vs real sentences of an augmented transfer set: lengths, distinct-n, the teacher's label
    distribution, random generated examples."""
    input:
        data="results/data/{task}",
        transfer="results/transfer/{task}/augmented.parquet",
        hygiene="results/transfer/{task}/hygiene.json",
        signals="results/signals/{teacher}/{task}/augmented.safetensors",
    output:
        json="results/transfer/{task}/statistics/{teacher}.json",
        markdown="results/transfer/{task}/statistics/{teacher}.md",
        html=report(
            "results/report/transfer_{task}_{teacher}.html",
            caption="../report/transfer_statistics.rst",
            category="Sučík (2020)",
            subcategory="Augmented transfer sets (§3.2)",
            labels={"task": "{task}", "teacher": "{teacher}"},
        ),
    log:
        "logs/transfer_statistics/{teacher}/{task}.log",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        code=code_of("transfer_statistics.py"),
    script:
        "../scripts/transfer_statistics.py"
