"""Repository tooling; a package only so test fixtures can import infra.local from the repo root."""
