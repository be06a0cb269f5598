"""Rule classify_sentences: every listed model's prediction and confidence on a list of sentences (thesis Tables
6.3 and C.1), beside the predictions the list reports."""

from kdflow.analysis.sentences import classify, read_sentences, sentence_document, sentence_summary, sentence_table
from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.distillation.named_models import load_model

with rule_job(snakemake):
    task = TaskData.load(snakemake.input.data)
    labels = task.meta["labels"]
    sentences = read_sentences(snakemake.input.sentences, labels)
    device = select_device(snakemake.params.device)
    precision = resolve_precision(snakemake.params.precision, device)
    logits = {}
    for name, params in snakemake.params.models.items():
        files = {"teacher_model": snakemake.input[f"{name}_teacher"], "runs_dir": params.get("runs_dir"),
                 "selection": snakemake.input.get(f"{name}_selection")}
        model = load_model(params["reference"], files, task.num_labels)
        logits[name] = classify(model, sentences.frame["sentence"], device, precision)
    reported = snakemake.params.reported
    table = sentence_table(sentences, logits, labels, reported)
    table.to_csv(snakemake.output.csv, index=False)
    summary = sentence_summary(table, list(logits), reported)
    sentence_document(table, summary, snakemake.wildcards.task, snakemake.input.sentences).write(
        snakemake.output.markdown, snakemake.output.html
    )
