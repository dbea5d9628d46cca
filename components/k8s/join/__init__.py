"""The bootstrap token nodes join with, and its rotation."""
