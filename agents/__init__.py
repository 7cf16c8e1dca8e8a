"""The agent: Q-networks, DeepMind's centered RMSProp, the learner, how its updates run, and
the ε-greedy policy everything acts through."""
