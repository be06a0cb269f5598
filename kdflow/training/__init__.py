"""Stage 2, the one training loop and what it needs: tokenised batches, Hugging Face model helpers, the loss
convention's task loss, resumable checkpoints, predictions tables, data-parallel launch."""
