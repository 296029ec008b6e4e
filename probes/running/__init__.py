"""One run: the corpus in chunks, batches through the capture into each probe, state files, merging."""
