"""Adapting to one episode at test time: fine-tuning, Meta-Dataset's Finetune, k-NN."""

__all__ = ["batched_finetune", "batched_maml", "finetune", "finetune_augment", "knn", "md_finetune"]
