"""Test support: finding servers and opening stores on them."""
