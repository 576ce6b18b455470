"""How models are wired: hooks and interceptions that insert probe ops."""
