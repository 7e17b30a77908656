"""Ground-floor utilities shared by every stage: text helpers (language, token counts) and paths.

Nothing here imports a pipeline stage, so any stage may import it."""
