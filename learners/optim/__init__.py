"""How weights are updated: optimiser and weight-decay forms, LR schedules, mixed precision."""
