"""Step definitions for tests/features/failures.feature (placeholder)."""
