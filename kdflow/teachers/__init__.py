"""Stage 3, teachers: fine-tuning on a task, and the per-layer pseudo-heads (Universal-KD §4.1)."""
