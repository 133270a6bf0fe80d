"""Adapting to one episode at test time: fine-tuning, Meta-Dataset's Finetune, k-NN."""
