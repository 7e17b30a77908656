"""Effect assessment (Med-R2 Algorithm 2): iterate retrieval with the previous chain of thought
and stop when the answer is stable relative to how much the evidence moved."""
