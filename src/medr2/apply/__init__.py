"""Evidence applying (Med-R2): pack the selected evidence into the context window, generate a
chain of thought over numbered passages, and return an answer whose citations are checked."""
