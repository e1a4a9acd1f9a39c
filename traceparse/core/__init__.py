"""``Profile`` (the tables and analyses of one run) and ``load``/``load_all``."""
