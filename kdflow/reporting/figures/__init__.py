"""The papers' figures as PNG files, drawn from kdflow's result tables, one module per paper:

* :mod:`kdflow.reporting.figures.thesis`: Sučík (2020), Figs. 4.2, 6.1-6.3, 6.5, 6.6, A.1, B.1-B.12, C.1 and C.2
  (teachers' fine-tuning, probing, the prediction analysis, the class distribution and the exploration);
* :mod:`kdflow.reporting.figures.universal_kd`: Universal-KD (Wu et al. 2021) Fig. 3, pseudo-heads and the
  attention over teacher layers (which also draws ALP-KD Fig. 3);
* :mod:`kdflow.reporting.figures.alp_kd`: ALP-KD (Passban et al. 2021) Fig. 4, layer outputs;
* :mod:`kdflow.reporting.figures.style`: what they share: the figure, its saving, legends, the palette and labels.

Import a figure from its module; this package re-exports nothing.
"""
