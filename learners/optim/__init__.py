"""How weights are updated: optimiser and weight-decay forms, LR schedules, mixed precision."""

__all__ = ["lr_schedule", "mixed_precision", "weight_decay"]
