"""Class splits (train / valid / test): split files, published, random, semantic and ATG splits."""
