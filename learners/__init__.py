"""Few-shot learners in PyTorch: backbones, episodic and non-episodic methods, training loop,
evaluation and reports (Meta-Dataset, transductive fine-tuning, FIX-ML and ATG papers)."""
