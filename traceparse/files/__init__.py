"""Finding captures and writing files: local paths and fsspec URLs, atomic writes."""
