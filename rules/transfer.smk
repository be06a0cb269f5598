# Stage transfer (kdflow.transfer): the thesis's generator and the augmented or unlabelled transfer sets
# (§3.2), and the signals students learn from: the teacher's logits, hidden states and pseudo-head outputs
# over each transfer set.


use rule kdflow_device_job as finetune_generator with:
    """Fine-tune the generator (a causal LM, GPT-2 medium in the thesis) on a task's training sentences; keep
    the best dev perplexity's model, with its training record (model/training.json)."""
    input:
        data=paths.DATA,
    output:
        model=directory(paths.GENERATOR_MODEL),
    log:
        "logs/finetune_generator/{task}.log",
    benchmark:
        paths.benchmark("finetune_generator/{task}")
    threads: configured_resource(config, "threads", "generation")
    resources:
        **configured_resources(config, "generation"),
    params:
        **runs("finetune_generator.py"),
        settings=lambda w: generator_settings(config),


use rule kdflow_device_job as evaluate_generator with:
    """Measure a fine-tuned generator's held-out (dev) perplexity, with its training record and curves. A job
    of its own: losing its files does not fine-tune the generator again and resample its transfer set.
    """
    input:
        data=paths.DATA,
        model=paths.GENERATOR_MODEL,
    output:
        metrics=paths.GENERATOR_METRICS,
        curves=paths.GENERATOR_CURVES,
    log:
        "logs/evaluate_generator/{task}.log",
    benchmark:
        paths.benchmark("evaluate_generator/{task}")
    threads: configured_resource(config, "threads", "generation")
    resources:
        **configured_resources(config, "generation"),
    params:
        **runs("evaluate_generator.py"),


use rule kdflow_device_job as sample_transfer_shard with:
    """One shard of the generated sentences, sampled with its own seed (a rerun reproduces it)."""
    input:
        data=paths.DATA,
        generator=paths.GENERATOR_MODEL,
    output:
        paths.TRANSFER_SHARD,
    log:
        "logs/sample_transfer_shard/{task}/{shard}.log",
    benchmark:
        paths.benchmark("sample_transfer_shard/{task}/{shard}")
    threads: configured_resource(config, "threads", "generation")
    resources:
        **configured_resources(config, "generation"),
    params:
        **runs("sample_transfer_shard.py"),
        sampling=lambda w: sampling_settings(config),


use rule kdflow_job as build_transfer_set with:
    """Train plus the sources of a transfer set (generated shards, the researcher's unlabelled text), each after
    its hygiene: no malformed or empty sequences and, as `generation.hygiene` and `unlabelled.hygiene` say, no
    unfinished, copied or repeated ones; counts per source."""
    input:
        unpack(lambda w: transfer_set_inputs(config, w.transfer, w.task)),
    output:
        transfer=paths.TRANSFER_SET,
        hygiene=paths.TRANSFER_HYGIENE,
    log:
        "logs/build_transfer_set/{task}/{transfer}.log",
    benchmark:
        paths.benchmark("build_transfer_set/{task}/{transfer}")
    wildcard_constraints:
        transfer="augmented|unlabelled|unlabelled_augmented",
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        **runs("build_transfer_set.py"),
        hygiene=lambda w: hygiene_settings(config, w.transfer),


use rule kdflow_job as transfer_statistics with:
    """Generated vs real sentences of an augmented transfer set: lengths, distinct-n, the teacher's label
    distribution, random generated examples."""
    input:
        data=paths.DATA,
        transfer=paths.TRANSFER_SET.format(task="{task}", transfer="augmented"),
        hygiene=paths.TRANSFER_HYGIENE.format(task="{task}", transfer="augmented"),
        signals=paths.SIGNALS.format(teacher="{teacher}", task="{task}", transfer="augmented"),
    output:
        json=paths.TRANSFER_STATISTICS_JSON,
        csv=report(
            paths.TRANSFER_STATISTICS_CSV,
            caption="../report/transfer_statistics.rst",
            **paper_place("thesis_sucik2020", "Augmented transfer sets (§3.2)"),
            labels={"task": "{task}", "teacher": "{teacher}", "format": "raw CSV"},
        ),
        markdown=paths.TRANSFER_STATISTICS_MD,
        html=report(
            paths.TRANSFER_STATISTICS_PAGE,
            caption="../report/transfer_statistics.rst",
            **paper_place("thesis_sucik2020", "Augmented transfer sets (§3.2)"),
            labels={"task": "{task}", "teacher": "{teacher}", "format": "page"},
        ),
    log:
        "logs/transfer_statistics/{teacher}/{task}.log",
    benchmark:
        paths.benchmark("transfer_statistics/{teacher}/{task}")
    resources:
        mem_mb=4000,
        runtime=15,
    params:
        **runs("transfer_statistics.py"),


use rule kdflow_device_job as compute_teacher_signals with:
    """The frozen teacher's logits, pseudo-head outputs (and layers, if a method needs them) on the
    transfer set, computed once and shared by every student distilled from it."""
    input:
        unpack(lambda w: teacher_signal_inputs(w.teacher, w.task, w.transfer)),
    output:
        paths.SIGNALS,
    log:
        "logs/compute_teacher_signals/{teacher}/{task}/{transfer}.log",
    benchmark:
        paths.benchmark("compute_teacher_signals/{teacher}/{task}/{transfer}")
    threads: configured_resource(config, "threads", "teachers.{teacher}")
    resources:
        **configured_resources(config, "teachers.{teacher}", one_process=True),
    params:
        **runs("compute_teacher_signals.py"),
        needed_signals=lambda w: needed_signals(config, w.teacher, w.task),
        settings=teacher_params,
