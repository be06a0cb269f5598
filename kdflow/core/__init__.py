"""Stage 0, the foundations every stage uses: tasks, prepared data, metrics, atomic outputs, errors, process
set-up."""
