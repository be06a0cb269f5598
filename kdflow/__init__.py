"""kdflow: knowledge distillation from BERT-family teachers, as one reproducible Snakemake workflow."""

__version__ = "0.1.0"
