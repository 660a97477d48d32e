"""Runnable workflows from the two seed documents; every one is tested."""
