"""Stage 4, transfer sets: train or augmented with generated text (thesis §3.2), and the teacher's labels on them
(the signals students learn from)."""
