"""Stage 8, analysis of trained models: the thesis's prediction analysis (§6.2), inference cost (Table 5.2), layer
attention (Universal-KD Fig. 3)."""
