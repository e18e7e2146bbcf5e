"""Dataset layout, loading into tensors, batching and the embedded sample dataset."""
