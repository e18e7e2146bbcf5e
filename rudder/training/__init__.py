"""Training: the loop (trainer), what a batch gives its loss (batch_supervision), optimisers
and schedules (optim), several processes (distributed), devices, checkpoints and the step
audit."""
