"""Stage 9, results: experiment, probing and paper tables, GLUE submission files, figures and the report's pages."""
