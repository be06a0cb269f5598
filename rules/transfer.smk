# Stage transfer (kdflow.transfer): the thesis's generator and the augmented or unlabelled transfer sets
# (§3.2), and the signals students learn from: the teacher's logits, hidden states and pseudo-head outputs
# over each transfer set.


rule finetune_generator:
    """Fine-tune the generator (a causal LM, GPT-2 medium in the thesis) on a task's training sentences; keep
    the best dev perplexity's model, with its training record (model/training.json)."""
    input:
        data="results/data/{task}",
    output:
        model=directory("results/generators/{task}/model"),
    log:
        "logs/finetune_generator/{task}.log",
    benchmark:
        "results/benchmarks/finetune_generator/{task}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "generation")
    resources:
        gpu=configured_resource("gpu", "generation"),
        mem_mb=configured_resource("mem_mb", "generation"),
        runtime=configured_resource("runtime", "generation"),
    params:
        settings=lambda w: generator_settings(config),
        device=config["device"],
        precision=config["precision"],
        code=code_of("finetune_generator.py"),
    script:
        "../scripts/finetune_generator.py"


rule evaluate_generator:
    """Measure a fine-tuned generator's held-out (dev) perplexity, with its training record and curves. A job
    of its own: losing its files does not fine-tune the generator again and resample its transfer set.
    """
    input:
        data="results/data/{task}",
        model="results/generators/{task}/model",
    output:
        metrics="results/generators/{task}/metrics.json",
        curves="results/generators/{task}/curves.parquet",
    log:
        "logs/evaluate_generator/{task}.log",
    benchmark:
        "results/benchmarks/evaluate_generator/{task}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "generation")
    resources:
        gpu=configured_resource("gpu", "generation"),
        mem_mb=configured_resource("mem_mb", "generation"),
        runtime=configured_resource("runtime", "generation"),
    params:
        device=config["device"],
        precision=config["precision"],
        code=code_of("evaluate_generator.py"),
    script:
        "../scripts/evaluate_generator.py"


rule sample_transfer_shard:
    """One shard of the generated sentences, sampled with its own seed (a rerun reproduces it)."""
    input:
        data="results/data/{task}",
        generator="results/generators/{task}/model",
    output:
        "results/transfer/{task}/shards/{shard}.parquet",
    log:
        "logs/sample_transfer_shard/{task}/{shard}.log",
    benchmark:
        "results/benchmarks/sample_transfer_shard/{task}/{shard}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "generation")
    resources:
        gpu=configured_resource("gpu", "generation"),
        mem_mb=configured_resource("mem_mb", "generation"),
        runtime=configured_resource("runtime", "generation"),
    params:
        sampling=lambda w: sampling_settings(config),
        device=config["device"],
        precision=config["precision"],
        code=code_of("sample_transfer_shard.py"),
    script:
        "../scripts/sample_transfer_shard.py"


rule build_transfer_set:
    """Train plus the sources of a transfer set (generated shards, the researcher's unlabelled text), each after
    its hygiene: no malformed or empty sequences and, as `generation.hygiene` and `unlabelled.hygiene` say, no
    unfinished, copied or repeated ones; counts per source."""
    input:
        unpack(lambda w: transfer_set_inputs(config, w.transfer, w.task)),
    output:
        transfer="results/transfer/{task}/{transfer}.parquet",
        hygiene="results/transfer/{task}/{transfer}.hygiene.json",
    log:
        "logs/build_transfer_set/{task}/{transfer}.log",
    benchmark:
        "results/benchmarks/build_transfer_set/{task}/{transfer}.tsv"
    wildcard_constraints:
        transfer="augmented|unlabelled|unlabelled_augmented",
    conda:
        "../envs/kdflow.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        hygiene=lambda w: hygiene_settings(config, w.transfer),
        code=code_of("build_transfer_set.py"),
    script:
        "../scripts/build_transfer_set.py"


rule transfer_statistics:
    """Generated vs real sentences of an augmented transfer set: lengths, distinct-n, the teacher's label
    distribution, random generated examples."""
    input:
        data="results/data/{task}",
        transfer="results/transfer/{task}/augmented.parquet",
        hygiene="results/transfer/{task}/augmented.hygiene.json",
        signals="results/signals/{teacher}/{task}/augmented.safetensors",
    output:
        json="results/transfer/{task}/statistics/{teacher}.json",
        csv=report(
            "results/transfer/{task}/statistics/{teacher}.csv",
            caption="../report/transfer_statistics.rst",
            **paper_place("thesis_sucik2020", "Augmented transfer sets (§3.2)"),
            labels={"task": "{task}", "teacher": "{teacher}", "format": "raw CSV"},
        ),
        markdown="results/transfer/{task}/statistics/{teacher}.md",
        html=report(
            "results/report/transfer_{task}_{teacher}.html",
            caption="../report/transfer_statistics.rst",
            **paper_place("thesis_sucik2020", "Augmented transfer sets (§3.2)"),
            labels={"task": "{task}", "teacher": "{teacher}", "format": "page"},
        ),
    log:
        "logs/transfer_statistics/{teacher}/{task}.log",
    benchmark:
        "results/benchmarks/transfer_statistics/{teacher}/{task}.tsv"
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


rule compute_teacher_signals:
    """The frozen teacher's logits, pseudo-head outputs (and layers, if a method needs them) on the
    transfer set, computed once and shared by every student distilled from it."""
    input:
        unpack(lambda w: teacher_signal_inputs(w.teacher, w.task, w.transfer)),
    output:
        "results/signals/{teacher}/{task}/{transfer}.safetensors",
    log:
        "logs/compute_teacher_signals/{teacher}/{task}/{transfer}.log",
    benchmark:
        "results/benchmarks/compute_teacher_signals/{teacher}/{task}/{transfer}.tsv"
    conda:
        "../envs/kdflow.yaml"
    threads: configured_resource("threads", "teachers.{teacher}")
    resources:
        gpu=one_process_gpu(configured_resource("gpu", "teachers.{teacher}")),
        mem_mb=configured_resource("mem_mb", "teachers.{teacher}"),
        runtime=configured_resource("runtime", "teachers.{teacher}"),
    params:
        include_layers=lambda w: signal_needs(config, w.teacher, w.task),
        settings=teacher_params,
        device=config["device"],
        precision=config["precision"],
        code=code_of("compute_teacher_signals.py"),
    script:
        "../scripts/compute_teacher_signals.py"
