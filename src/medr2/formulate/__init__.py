"""Question formulation (Med-R2): classify into EBM category and question type, reformulate per
category, and name the document types the question expects."""
