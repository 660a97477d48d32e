"""Scripts that install and run local stand-ins for AWS services (127.0.0.1 only)."""
