"""What a learner is (the Learner interface, its config, the registry) and one module per method."""
