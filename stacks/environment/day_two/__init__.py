"""What a running environment does with each changed key (in place, rolling, refused): the classes, the per-key entries and the check."""
